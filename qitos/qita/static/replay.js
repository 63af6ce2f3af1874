// qita replay: step through a run. Two sources of steps:
//  - "remote" (the board): each step is an HTML fragment rendered and escaped by the server;
//  - "inline" (an exported file): every step is already in the page, one is shown at a time.
// Keys: left/right arrows step, space plays or pauses, Home/End jump.
(function () {
  "use strict";
  var root = document.getElementById("replay");
  if (!root) { return; }
  var source = root.dataset.source;
  var total = parseInt(root.dataset.total, 10) || 0;
  var current = parseInt(root.dataset.start, 10) || 1;
  var stage = document.getElementById("replay-stage");
  var range = document.getElementById("replay-range");
  var pos = document.getElementById("replay-pos");
  var speed = document.getElementById("replay-speed");
  var playButton = document.getElementById("replay-play");
  var pauseButton = document.getElementById("replay-pause");
  var timer = null;
  var cache = new Map();
  var pending = 0;

  function fetchFrame(n) {
    if (cache.has(n)) { return cache.get(n); }
    var promise = fetch(root.dataset.frameUrl + n, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) { throw new Error("step " + n + ": HTTP " + r.status); }
      return r.text();
    });
    cache.set(n, promise);
    if (cache.size > 60) { cache.delete(cache.keys().next().value); }
    promise.catch(function () { cache.delete(n); });
    return promise;
  }

  function setState(frame) {
    document.querySelectorAll("[data-state]").forEach(function (el) {
      var key = el.dataset.state;
      el.textContent = key === "position" ? frame.dataset.position + " / " + total : (frame.dataset[key] || "–");
    });
  }

  function showInline(n) {
    document.querySelectorAll(".frame-inline").forEach(function (frame) {
      var on = parseInt(frame.dataset.position, 10) === n;
      frame.classList.toggle("current", on);
      if (on) { setState(frame); }
    });
  }

  function showRemote(n) {
    var ticket = ++pending;
    return fetchFrame(n).then(function (html) {
      if (ticket !== pending) { return; }
      stage.innerHTML = html; // server-rendered, autoescaped trace text
      history.replaceState(null, "", "?step=" + n);
      if (n < total) { fetchFrame(n + 1); }
    }).catch(function (err) {
      stage.textContent = "Could not load this step: " + err.message;
      pause();
    });
  }

  function show(n) {
    if (total < 1) { return; }
    current = Math.max(1, Math.min(total, n));
    if (range) { range.value = String(current); }
    if (pos) { pos.textContent = "step " + current + " / " + total; }
    document.querySelectorAll("#replay-strip .cell").forEach(function (cell) {
      cell.classList.toggle("on", parseInt(cell.dataset.position, 10) === current);
    });
    if (source === "inline") { showInline(current); } else { showRemote(current); }
  }

  function delay() {
    var factor = parseFloat(speed ? speed.value : "1") || 1;
    return 1200 / factor;
  }

  function tick() {
    if (current >= total) { pause(); return; }
    show(current + 1);
    timer = window.setTimeout(tick, delay());
  }

  function play() {
    if (timer !== null || total < 1) { return; }
    if (current >= total) { show(1); }
    playButton.hidden = true;
    pauseButton.hidden = false;
    root.classList.add("playing");
    timer = window.setTimeout(tick, delay());
  }

  function pause() {
    if (timer !== null) { window.clearTimeout(timer); }
    timer = null;
    playButton.hidden = false;
    pauseButton.hidden = true;
    root.classList.remove("playing");
  }

  var actions = {
    first: function () { pause(); show(1); },
    prev: function () { pause(); show(current - 1); },
    next: function () { pause(); show(current + 1); },
    last: function () { pause(); show(total); },
    play: play,
    pause: pause
  };

  root.querySelectorAll("[data-action]").forEach(function (el) {
    el.addEventListener("click", function (event) {
      event.preventDefault();
      enterReplay();
      actions[el.dataset.action]();
    });
  });
  if (range) {
    range.addEventListener("input", function () { pause(); show(parseInt(range.value, 10)); });
  }
  if (speed) {
    speed.addEventListener("change", function () {
      if (timer !== null) { window.clearTimeout(timer); timer = window.setTimeout(tick, delay()); }
    });
  }
  document.querySelectorAll("#replay-strip .cell").forEach(function (cell) {
    cell.addEventListener("click", function (event) {
      event.preventDefault();
      pause();
      show(parseInt(cell.dataset.position, 10));
    });
  });
  document.addEventListener("keydown", function (event) {
    var tag = (event.target && event.target.tagName) || "";
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || !replaying()) { return; }
    var map = { ArrowRight: "next", ArrowLeft: "prev", Home: "first", End: "last" };
    if (map[event.key]) { event.preventDefault(); actions[map[event.key]](); }
    if (event.key === " ") { event.preventDefault(); if (timer === null) { play(); } else { pause(); } }
  });

  // Exported files: Timeline and Replay tabs over the same steps.
  function replaying() { return source !== "inline" || document.body.dataset.view === "replay"; }
  function enterReplay() { if (source === "inline") { setView("replay"); } }
  function setView(view) {
    document.body.dataset.view = view;
    document.querySelectorAll("[data-tab]").forEach(function (tab) {
      tab.classList.toggle("on", tab.dataset.tab === view);
    });
    if (view === "replay") { show(current); } else { pause(); }
  }
  document.querySelectorAll("[data-tab]").forEach(function (tab) {
    tab.addEventListener("click", function () { setView(tab.dataset.tab); });
  });
  if (source !== "inline" && current < total) { fetchFrame(current + 1); }
  if (source === "inline") {
    var match = /^#step=(\d+)$/.exec(window.location.hash);
    if (match) { current = parseInt(match[1], 10); setView("replay"); }
  }
})();
