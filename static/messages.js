// The conversation: user bubbles, assistant answers (Markdown repainted once per frame while they
// stream), their copy buttons and the stats line under each answer.
import { ui, el, announce } from "./ui.js";
import { fmtMs, fmtRate } from "./format.js";
import { renderMarkdown } from "./markdown.js";

// Streaming text follows the reader only if they were already at the bottom (within 96 px).
function nearBottom() {
  const m = ui.main;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 96;
}
export function scrollToBottom() { ui.main.scrollTop = ui.main.scrollHeight; }

// pictures: [{url, name}] the message carries (attachments.js), shown above its text.
export function addUserMessage(text, pictures = []) {
  const article = el("article", "msg msg-user", "");
  article.setAttribute("aria-label", "You");
  if (pictures.length) {
    const row = el("div", "msg-pictures", "");
    row.append(...pictures.map((picture) => {
      const img = document.createElement("img");
      img.src = picture.url;
      img.alt = picture.name;
      img.dataset.testid = "user-picture";
      return img;
    }));
    article.append(row);
  }
  const bubble = el("div", "bubble", text);
  bubble.dataset.testid = "user-message";
  bubble.hidden = !text;  // a message of pictures alone
  article.append(bubble);
  ui.messages.append(article);
  return article;
}

export function addAssistantMessage(model) {
  const article = el("article", "msg msg-assistant", "");
  article.setAttribute("aria-label", model.name);
  article.setAttribute("aria-busy", "true");
  const avatar = document.createElement("img");
  avatar.src = "/static/icon.svg";
  avatar.alt = "";
  avatar.className = "avatar";
  const body = el("div", "msg-body", "");
  const name = el("div", "msg-name", model.name);
  const content = el("div", "content markdown", "");
  content.dataset.testid = "assistant-message";
  const typing = el("span", "typing", "");
  typing.setAttribute("aria-label", "Thinking");
  typing.append(el("i"), el("i"), el("i"));
  content.append(typing);
  const foot = el("div", "msg-foot", "");
  const stats = el("span", "stats", "");
  stats.dataset.testid = "stats";
  foot.append(stats);
  body.append(name, content, foot);
  article.append(avatar, body);
  ui.messages.append(article);

  let pending = null;
  let text = "";
  const paint = () => {
    pending = null;
    const stick = nearBottom();
    renderMarkdown(content, text);
    content.classList.add("streaming");
    if (stick) scrollToBottom();
  };
  return {
    article,
    setText(t) {
      text = t;
      if (!pending) pending = requestAnimationFrame(paint);
    },
    finish(statsText, title, fullText) {
      if (pending) cancelAnimationFrame(pending);
      text = fullText;
      const stick = nearBottom();
      renderMarkdown(content, text);
      content.classList.remove("streaming");
      if (!text) content.append(el("span", "muted empty", "(no text)"));
      stats.textContent = statsText;
      if (title) stats.title = title;
      foot.append(copyButton(() => text));
      article.setAttribute("aria-busy", "false");
      if (stick) scrollToBottom();
    },
    fail(message, partial) {
      if (pending) cancelAnimationFrame(pending);
      renderMarkdown(content, partial);
      content.classList.remove("streaming");
      if (!partial) content.append(el("span", "muted empty", "No answer."));
      article.classList.add("msg-failed");
      stats.textContent = `Failed: ${message}`;
      article.setAttribute("aria-busy", "false");
    },
  };
}

function copyButton(getText) {
  const b = el("button", "icon-button copy", "");
  b.type = "button";
  b.setAttribute("aria-label", "Copy the answer");
  b.title = "Copy";
  b.innerHTML = '<svg class="icon" aria-hidden="true" viewBox="0 0 24 24"><path d="M16 1H4a2 2 0 0 0-2 2v14h2V3h12zm3 4H8a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h11a2 2 0 0 0 2-2V7a2 2 0 0 0-2-2m0 16H8V7h11z"/></svg>';
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(getText());
      b.classList.add("copied");
      b.title = "Copied";
      announce("Copied the answer");
      setTimeout(() => { b.classList.remove("copied"); b.title = "Copy"; }, 1500);
    } catch { /* clipboard refused: nothing to do */ }
  });
  return b;
}

// [line, tooltip] under an answer: the worker's stats (its `response`'s) first, the page's own clock
// (`local`: tokens seen, time to first token, decode time) where the worker gave none.
export function statsLine(done, local) {
  const n = Array.isArray(done.tokens) ? done.tokens.length : local.tokens;
  const parts = [`${n} token${n === 1 ? "" : "s"}`];
  const rate = done.decode_tok_s ?? (local.decodeMs > 0 && n > 1 ? ((n - 1) * 1000) / local.decodeMs : null);
  if (rate != null && Number.isFinite(rate) && rate > 0) parts.push(`${fmtRate(rate)} tok/s`);
  const ttft = done.ttft_ms ?? local.ttft;
  if (ttft != null) parts.push(`${fmtMs(ttft)} to first token`);
  if (done.pictures) {  // decoded in the worker and encoded on the GPU before the prompt, or found in the cache
    const p = done.pictures;
    const how = done.picture_ms == null ? "reused" : `in ${fmtMs(done.picture_ms)}`;
    parts.push(`${p} picture${p === 1 ? "" : "s"}: ${done.picture_tokens} tokens ${how}`);
  }
  if (done.stop === "cancel") parts.push("stopped");
  else if (done.stop === "length") parts.push("reached the token limit");
  if (done.dropped_exchanges) {  // the context was full: the worker left out the oldest turns
    const n = done.dropped_exchanges;
    parts.push(`left out the oldest ${n} exchange${n === 1 ? "" : "s"} to fit the context`);
  }
  const title = [];
  if (done.prompt_tokens != null) title.push(`Prompt: ${done.prompt_tokens} tokens${done.prefill_tok_s ? ` at ${fmtRate(done.prefill_tok_s)} tok/s` : ""}`);
  if (done.host_ms_per_token != null) title.push(`Python host time: ${done.host_ms_per_token.toFixed(1)} ms per token`);
  return [parts.join(" · "), title.join(" · ")];
}
