// login: POST /console/login with the token as a bearer token (and the CSRF
// header); the answer sets the HttpOnly session cookie, then the app loads.
"use strict";
document.getElementById("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const err = document.getElementById("login-error");
  err.textContent = "";
  const token = document.getElementById("token").value.trim();
  const r = await fetch("/console/login", {
    method: "POST", credentials: "same-origin",
    headers: { "Authorization": "Bearer " + token, "X-MTC-CSRF": "1" },
  });
  if (r.ok) { location.replace("/"); return; }
  let msg = "login failed (HTTP " + r.status + ")";
  try { msg = (await r.json()).error.message; } catch (e) { /* keep msg */ }
  err.textContent = msg;
});
