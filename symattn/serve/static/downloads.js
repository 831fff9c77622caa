// symattn serve: the download buttons. The problem is the last one derived: the one the
// address holds (#p=..., written after each derivation), else the page's starting problem.
// Each button posts it to /download/KIND and saves the answer under the name the server gives.
"use strict";
(function () {
  const status = document.getElementById("download-status");

  // the view the page shows, from its address (&d= digits or &pl= places, &r= the worked
  // row or rows, 0-based: "1" or "0,2"), so a download is the derivation on the page
  function lastDerived() {
    const hash = location.hash.startsWith("#p=") ? location.hash.slice(3) : "";
    const [text, ...rest] = hash.split("&");
    const view = { digits: "3" };
    for (const part of rest) {
      const [name, value] = part.split("=");
      const plain = decodeURIComponent(value || "");
      if (name === "d" && /^[0-9]{1,4}$/.test(plain)) view.digits = plain;
      else if (name === "pl" && /^[0-9]{1,4}$/.test(plain)) view.places = plain;
      else if (name === "r" && /^[0-9]{1,5}(,[0-9]{1,5})*$/.test(plain)) view.row = plain;
    }
    if (view.places !== undefined) delete view.digits;
    if (text) {
      try {
        const data = JSON.parse(decodeURIComponent(text));
        if (data && typeof data === "object" && !Array.isArray(data)) return [data, view];
      } catch (e) { /* not an address the page wrote: the starting problem */ }
    }
    return [JSON.parse(document.getElementById("problem-data").textContent), view];
  }

  function savedName(reply, kind) {
    const header = reply.headers.get("Content-Disposition") || "";
    const utf8 = /filename\*=UTF-8''([^;]+)/.exec(header);
    const plain = /filename="([^"]+)"/.exec(header);
    try {
      if (utf8) return decodeURIComponent(utf8[1]);
    } catch (e) { /* fall back to the plain name */ }
    return plain ? plain[1] : "derivation." + kind;
  }

  async function download(kind) {
    const [problem, view] = lastDerived();
    const query = new URLSearchParams(view);
    if (kind === "worksheet") {
      const versions = document.getElementById("worksheet-versions").value.trim() || "1";
      if (versions !== "1") {
        query.set("versions", versions);
        query.set("seed", document.getElementById("worksheet-seed").value.trim());
      }
      // the form's options, named as symattn worksheet's flags: a box sends 1 when ticked, a
      // menu or a text its value when not empty (the server checks them as the CLI does)
      for (const input of document.querySelectorAll("#worksheet-options [data-option]")) {
        const value = input.type === "checkbox" ? (input.checked ? "1" : "") : input.value.trim();
        if (value !== "") query.set(input.dataset.option, value);
      }
    }
    status.textContent = "making the " + kind + " file…";
    status.className = "busy";
    let reply;
    try {
      reply = await fetch("/download/" + kind + "?" + query, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(problem) });
    } catch (e) {
      status.textContent = "the server did not answer: is symattn serve still running?";
      status.className = "error";
      return;
    }
    if (!reply.ok) {
      let message = `the server answered ${reply.status}`;
      try { message = (await reply.json()).error || message; } catch (e) { /* not JSON */ }
      status.textContent = message;
      status.className = "error";
      document.body.dataset.downloadRefused = kind;
      return;
    }
    const link = document.createElement("a");
    link.href = URL.createObjectURL(await reply.blob());
    link.download = savedName(reply, kind);
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
    status.textContent = "";
    status.className = "";
  }

  for (const button of document.querySelectorAll("[data-download]")) {
    button.addEventListener("click", () => download(button.dataset.download));
  }
})();
