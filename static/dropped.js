// What a drop of files or folders holds (DataTransfer entries): the documents panel and the
// bring-your-own-model drop both walk them.

/** A file entry's File. */
export const fileOf = (entry) => new Promise((resolve, reject) => entry.file(resolve, reject));

/** A folder entry's entries (one level). */
export async function children(dir) {
  const reader = dir.createReader(), all = [];
  for (;;) {  // readEntries answers in batches (100 in Chrome) until an empty one
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!batch.length) return all;
    all.push(...batch);
  }
}
