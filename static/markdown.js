// A small, safe Markdown subset for model answers: fenced code, headings, lists, paragraphs,
// `inline code`, **bold**. Builds DOM nodes (never innerHTML), so model output cannot inject markup.
// Unclosed fences (mid-stream) render as code blocks that keep growing.

export function renderMarkdown(target, text) {
  const frag = document.createDocumentFragment();
  for (const block of parseBlocks(text)) frag.append(renderBlock(block));
  target.replaceChildren(frag);
}

function parseBlocks(text) {
  const blocks = [];
  const lines = text.split("\n");
  let para = null;
  let list = null;
  const flush = () => {
    if (para) blocks.push({ type: "p", text: para.join("\n") });
    if (list) blocks.push(list);
    para = null;
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+#.-]*)/);
    if (fence) {
      flush();
      const code = [];
      i++;
      while (i < lines.length && !/^\s*```\s*$/.test(lines[i])) code.push(lines[i++]);
      blocks.push({ type: "code", lang: fence[1], text: code.join("\n") });
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    const item = line.match(/^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/);
    if (!line.trim()) {
      flush();
    } else if (heading) {
      flush();
      blocks.push({ type: "h", text: heading[2] });
    } else if (item) {
      const ordered = item[2] !== undefined;
      if (para) { blocks.push({ type: "p", text: para.join("\n") }); para = null; }
      if (!list || list.ordered !== ordered) {
        if (list) blocks.push(list);
        list = { type: "list", ordered, start: ordered ? Number(item[2]) : 1, items: [] };
      }
      list.items.push(item[3]);
    } else if (list && /^\s+\S/.test(line)) {
      list.items[list.items.length - 1] += "\n" + line.trim();
    } else {
      if (list) { blocks.push(list); list = null; }
      para = para || [];
      para.push(line);
    }
  }
  flush();
  return blocks;
}

function renderBlock(block) {
  switch (block.type) {
    case "code": {
      const pre = document.createElement("pre");
      pre.className = "code";
      if (block.lang) pre.dataset.lang = block.lang;
      const code = document.createElement("code");
      code.textContent = block.text;
      pre.append(code);
      return pre;
    }
    case "h": {
      const h = document.createElement("p");
      h.className = "md-heading";
      appendInline(h, block.text);
      return h;
    }
    case "list": {
      const list = document.createElement(block.ordered ? "ol" : "ul");
      if (block.ordered && block.start !== 1) list.start = block.start;
      for (const text of block.items) {
        const li = document.createElement("li");
        appendInline(li, text);
        list.append(li);
      }
      return list;
    }
    default: {
      const p = document.createElement("p");
      appendInline(p, block.text);
      return p;
    }
  }
}

function appendInline(parent, text) {
  const re = /`([^`\n]+)`|\*\*([^*\n]+)\*\*/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) parent.append(text.slice(last, m.index));
    const node = document.createElement(m[1] !== undefined ? "code" : "strong");
    node.textContent = m[1] ?? m[2];
    parent.append(node);
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.append(text.slice(last));
}
