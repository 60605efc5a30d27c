// An answer from the user's documents: its citations (the response's `memory.citations`, made by
// py_engine/api/memory.py as for the desktop's /v1) as a Sources row under the answer, the answer's
// own [n] made buttons too, and a dialog showing the cited passage: its document, its place there
// ("page 3", "Garden > Tomatoes") and its text.
import { $, el } from "./ui.js";

const dialog = $("citation");

export function initCitations() {
  $("citation-close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("click", (ev) => { if (ev.target === dialog) dialog.close(); }); // the backdrop
}

/** Under the answer in `article` (messages.js), its citations; its text's [n] become buttons. */
export function showCitations(article, memory) {
  const cited = memory?.citations || [];
  if (!cited.length) return;
  const byNumber = new Map(cited.map((c) => [c.n, c]));
  linkify(article.querySelector(".content"), byNumber);
  const row = el("div", "sources");
  row.dataset.testid = "sources";
  row.append(el("span", "sources-label", "Sources"));
  for (const c of cited) {
    const chip = button(c, `[${c.n}] ${c.source}${c.place ? ` · ${c.place}` : ""}`, "source-chip");
    chip.dataset.testid = "citation";
    row.append(chip);
  }
  article.querySelector(".msg-foot").before(row);
}

function button(citation, text, className) {
  const b = el("button", className, text);
  b.type = "button";
  b.dataset.n = String(citation.n);
  b.title = `${citation.source}${citation.place ? `, ${citation.place}` : ""}`;
  b.addEventListener("click", () => open(citation));
  return b;
}

// The answer's "[n]" (outside code) as buttons, where n is one of its citations.
function linkify(content, byNumber) {
  const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement.closest("pre, code") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const nodes = [];
  while (walker.nextNode()) if (/\[\d{1,2}\]/.test(walker.currentNode.data)) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const parts = node.data.split(/(\[\d{1,2}\])/);
    node.replaceWith(...parts.map((part) => {
      const c = /^\[(\d{1,2})\]$/.test(part) ? byNumber.get(Number(part.slice(1, -1))) : null;
      if (!c) return document.createTextNode(part);
      const ref = button(c, part, "cite-ref");
      ref.dataset.testid = "citation-ref";
      return ref;
    }));
  }
}

function open(citation) {
  $("citation-source").textContent = citation.source;
  $("citation-place").textContent = citation.place || "";
  $("citation-place").hidden = !citation.place;
  $("citation-text").textContent = citation.text;
  $("citation-meta").textContent = `Passage [${citation.n}] of your documents · similarity ${citation.score.toFixed(2)}`;
  dialog.showModal();
}
