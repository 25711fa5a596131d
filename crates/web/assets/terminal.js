// The web terminal (docs/web-terminal.md): xterm.js on a shell in the
// workspace, through the API's connection route (kind=pty) with the
// dashboard's session cookie. The session's id lives in the page's address,
// so a reload attaches to the same shell; a dropped connection is opened
// again with the offset of the output already shown, and the agent sends
// what came after it.
(function () {
  "use strict";
  var host = document.getElementById("terminal");
  if (!host || typeof Terminal === "undefined" || typeof FitAddon === "undefined") {
    return;
  }
  var status = document.getElementById("terminal-status");
  var nonce = host.dataset.styleNonce;

  // xterm.js makes <style> elements for its cells: this page's policy takes
  // them by its nonce.
  var createElement = Document.prototype.createElement;
  Document.prototype.createElement = function (tag, options) {
    var element = createElement.call(this, tag, options);
    if (nonce && String(tag).toLowerCase() === "style") {
      element.setAttribute("nonce", nonce);
    }
    return element;
  };

  var INPUT = 0;
  var RESIZE = 1;
  var MAX_PAYLOAD = 65535;

  function newSessionId() {
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) {
      return (b < 16 ? "0" : "") + b.toString(16);
    }).join("");
  }

  var params = new URLSearchParams(location.search);
  var session = params.get("session");
  if (!session || !/^[A-Za-z0-9-]{1,64}$/.test(session)) {
    session = newSessionId();
    params.set("session", session);
    history.replaceState(null, "", location.pathname + "?" + params.toString());
  }

  var term = new Terminal({ cursorBlink: true, scrollback: 5000 });
  var fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(host);
  fit.fit();
  term.focus();

  var socket = null;
  var ended = false;
  var offset = 0;
  var retry = 500;
  var encoder = new TextEncoder();

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function send(kind, payload) {
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      return;
    }
    for (var start = 0; start < payload.length; start += MAX_PAYLOAD) {
      var chunk = payload.subarray(start, start + MAX_PAYLOAD);
      var frame = new Uint8Array(3 + chunk.length);
      frame[0] = kind;
      frame[1] = chunk.length >> 8;
      frame[2] = chunk.length & 255;
      frame.set(chunk, 3);
      socket.send(frame);
    }
  }

  function sendSize() {
    send(RESIZE, new Uint8Array([term.rows >> 8, term.rows & 255, term.cols >> 8, term.cols & 255]));
  }

  term.onData(function (data) {
    send(INPUT, encoder.encode(data));
  });
  term.onBinary(function (data) {
    send(INPUT, Uint8Array.from(data, function (c) { return c.charCodeAt(0) & 255; }));
  });
  term.onResize(sendSize);
  window.addEventListener("resize", function () { fit.fit(); });

  // Ctrl+Shift+C copies the selection, Ctrl+Shift+V pastes (Ctrl+C stays
  // the shell's interrupt).
  term.attachCustomKeyEventHandler(function (event) {
    if (event.type !== "keydown" || !event.ctrlKey || !event.shiftKey) {
      return true;
    }
    if (event.code === "KeyC" && term.hasSelection() && navigator.clipboard) {
      navigator.clipboard.writeText(term.getSelection());
      return false;
    }
    if (event.code === "KeyV" && navigator.clipboard && navigator.clipboard.readText) {
      navigator.clipboard.readText().then(function (text) { term.paste(text); });
      return false;
    }
    return true;
  });

  function connect() {
    var url = new URL(host.dataset.connect, location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("kind", "pty");
    url.searchParams.set("session", session);
    url.searchParams.set("rows", String(term.rows));
    url.searchParams.set("cols", String(term.cols));
    url.searchParams.set("offset", String(offset));
    if (host.dataset.agent) {
      url.searchParams.set("agent", host.dataset.agent);
    }
    if (host.dataset.app) {
      url.searchParams.set("app", host.dataset.app);
    }
    var ws = new WebSocket(url.toString());
    ws.binaryType = "arraybuffer";
    socket = ws;
    // The agent's first 8 bytes say where in the session's output the
    // bytes that follow start.
    var header = new Uint8Array(0);
    var started = false;
    ws.onopen = function () {
      retry = 500;
      say("Connected.");
      sendSize();
    };
    ws.onmessage = function (event) {
      var bytes = new Uint8Array(event.data);
      if (bytes.length === 0) {
        // The agent is done: the shell exited.
        ended = true;
        say("The shell exited.");
        term.write("\r\n[the shell exited]\r\n");
        ws.close();
        return;
      }
      if (!started) {
        var joined = new Uint8Array(header.length + bytes.length);
        joined.set(header);
        joined.set(bytes, header.length);
        if (joined.length < 8) {
          header = joined;
          return;
        }
        var from = Number(new DataView(joined.buffer, 0, 8).getBigUint64(0));
        if (from > offset) {
          term.write("\r\n[some output was lost while disconnected]\r\n");
        }
        offset = from;
        started = true;
        bytes = joined.subarray(8);
      }
      if (bytes.length > 0) {
        term.write(bytes);
        offset += bytes.length;
      }
    };
    ws.onclose = function () {
      if (socket !== ws) {
        return;
      }
      socket = null;
      if (ended) {
        return;
      }
      say("Disconnected: reconnecting…");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  connect();
})();
