// Abode's dashboard: the little that needs a script. Pages work without it
// (forms post, links navigate); this adds the live build log and the
// typed-name check of a delete. Text from the server is only ever set with
// textContent, never parsed as HTML.
"use strict";

function followLog(box) {
  const url = box.dataset.stream;
  const log = box.querySelector("pre.log");
  const stage = box.querySelector("[data-stage]");
  const status = box.querySelector("[data-status]");
  const source = new EventSource(url);
  source.addEventListener("line", (event) => {
    const line = JSON.parse(event.data);
    const row = document.createElement("div");
    const tag = document.createElement("span");
    tag.className = "stage";
    tag.textContent = "[" + line.stage + "] ";
    row.appendChild(tag);
    row.appendChild(document.createTextNode(line.text));
    log.appendChild(row);
    log.scrollTop = log.scrollHeight;
    if (stage) stage.textContent = line.stage;
  });
  source.addEventListener("status", (event) => {
    const state = JSON.parse(event.data);
    if (status) status.textContent = state.status.replace(/_/g, " ");
    if (state.done) {
      source.close();
      // The page shows what a finished build leaves: reload it once.
      window.location.reload();
    }
  });
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED && status) {
      status.textContent = "log stream closed; reload the page";
    }
  });
}

// The workspace's live metadata: each `metadata` event is the whole list;
// the rows the page drew are updated in place (text only).
function followMetadata(box) {
  const source = new EventSource(box.dataset.metadataStream);
  source.addEventListener("metadata", (event) => {
    for (const item of JSON.parse(event.data)) {
      const row = Array.from(box.querySelectorAll("tr[data-key]"))
        .find((tr) => tr.dataset.key === item.key);
      if (!row) continue;
      const value = row.querySelector("[data-value]");
      value.textContent = item.value;
      value.classList.toggle("notice", item.error);
      row.querySelector("[data-age]").textContent = item.age;
    }
  });
}

function guardDelete(form) {
  const input = form.querySelector("input[name=confirm_name]");
  const button = form.querySelector("button[type=submit]");
  const expected = form.dataset.name;
  const check = () => { button.disabled = input.value !== expected; };
  input.addEventListener("input", check);
  check();
}

// A template version from a folder archive: the file is the request's body
// (no multipart), the form's token goes in a header.
function upload(form) {
  const status = form.querySelector("[data-upload-status]");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = form.querySelector("input[type=file]").files[0];
    const named = form.querySelector("input[name=template]");
    const template = form.dataset.template || (named ? named.value : "");
    if (!file || !template) return;
    const query = new URLSearchParams();
    query.set("message", form.querySelector("input[name=message]").value);
    if (form.querySelector("input[name=activate]").checked) query.set("activate", "on");
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    status.textContent = "Uploading; the server validates the template with Terraform…";
    try {
      const response = await fetch("/templates/" + encodeURIComponent(template) + "/upload?" + query, {
        method: "POST",
        headers: { "x-csrf-token": form.dataset.csrf, "content-type": "application/gzip" },
        body: file,
      });
      if (response.ok) {
        window.location.assign(response.url);
        return;
      }
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const error = page.querySelector(".error");
      status.textContent = "Not pushed: " + (error ? error.textContent : "the server answered " + response.status);
    } catch (error) {
      status.textContent = "Not pushed: " + error;
    }
    button.disabled = false;
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form[data-upload]").forEach(upload);
  document.querySelectorAll("[data-stream]").forEach(followLog);
  document.querySelectorAll("[data-metadata-stream]").forEach(followMetadata);
  document.querySelectorAll("form[data-name]").forEach(guardDelete);
});
