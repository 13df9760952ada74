// Keeps the "time left" of the hosted pay page ticking. The server's count of seconds left is used, not the
// payer's clock, which may be wrong. At zero the buttons are disabled; the server refuses a late post anyway.
(function () {
  "use strict";
  var box = document.querySelector("[data-seconds-left]");
  if (!box) { return; }
  var value = document.getElementById("time-left");
  var secondsLeft = parseInt(box.getAttribute("data-seconds-left"), 10) || 0;
  var deadline = Date.now() + secondsLeft * 1000;

  function pad(n) { return n < 10 ? "0" + n : String(n); }

  function render(seconds) {
    var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    if (h > 0) { return h + " h " + pad(m) + " min"; }
    if (m > 0) { return m + " min " + pad(s) + " s"; }
    return s + " s";
  }

  function expire() {
    var form = document.getElementById("pay-form");
    if (form) {
      Array.prototype.forEach.call(form.querySelectorAll("button"), function (b) { b.disabled = true; });
      form.hidden = true;
    }
    box.hidden = true;
    var note = document.getElementById("expired-note");
    if (note) { note.hidden = false; }
  }

  function tick() {
    var seconds = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
    value.textContent = render(seconds);
    if (seconds <= 0) { expire(); return; }
    window.setTimeout(tick, 1000 - ((deadline - Date.now()) % 1000 || 0));
  }
  tick();
}());
