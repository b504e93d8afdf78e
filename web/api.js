// api.js: talking to the marspec server (same origin). Every error the server sends is
// {"error": ..., "field": ...}; ApiError keeps both so a form can point at the field.
"use strict";

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || "HTTP " + status);
    this.status = status;
    this.field = (body && body.field) || "";
  }
}

const api = {
  onUnauthorized: null, // called on a 401: the page then shows the token field
  // setToken keeps the API key for this tab, and in a cookie that the server takes for GET only:
  // the gallery's <img> and EventSource requests cannot send a header
  setToken(token) {
    sessionStorage.setItem("marspec-token", token);
    document.cookie = "marspec_key=" + encodeURIComponent(token) + "; path=/; SameSite=Strict" + (token ? "" : "; max-age=0");
  },
  async request(method, path, body) {
    const init = { method, headers: { Accept: "application/json" } };
    const token = sessionStorage.getItem("marspec-token");
    if (token) init.headers.Authorization = "Bearer " + token;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, { error: "the server cannot be reached (" + e.message + ")" });
    }
    if (res.status === 204) return null;
    let data = null;
    try {
      data = await res.json();
    } catch (e) {
      if (res.ok) throw new ApiError(res.status, { error: "the answer is not JSON" });
    }
    if (!res.ok) {
      const err = new ApiError(res.status, data);
      if (res.status === 401 && api.onUnauthorized) api.onUnauthorized();
      const retry = res.headers.get("Retry-After");
      if (retry) err.message += " (retry after " + retry + " s)";
      throw err;
    }
    return data;
  },
  models() { return this.request("GET", "/v1/models"); },
  keys() { return this.request("GET", "/v1/keys"); },
  create(req) { return this.request("POST", "/v1/generations", req); },
  get(id) { return this.request("GET", "/v1/generations/" + encodeURIComponent(id)); },
  remove(id) { return this.request("DELETE", "/v1/generations/" + encodeURIComponent(id)); },
  list(params) {
    const q = new URLSearchParams();
    // an empty after= is kept: it asks for the first page by cursor (no count of every job)
    for (const [k, v] of Object.entries(params)) if ((v !== "" || k === "after") && v != null) q.set(k, v);
    return this.request("GET", "/v1/generations?" + q.toString());
  },

  // follow streams a job's events (Server-Sent Events) to onEvent(type, data) and resolves
  // with the finished job. If the stream breaks before "done", it falls back to polling.
  follow(gen, onEvent) {
    return new Promise((resolve, reject) => {
      const finished = (g) => g.status !== "queued" && g.status !== "running";
      let over = false;
      const end = (g) => { over = true; onEvent("done", { generation: g }); resolve(g); };
      const poll = async () => {
        while (!over) {
          try {
            const g = await api.get(gen.id);
            onEvent("generation", { generation: g });
            if (finished(g)) return end(g);
          } catch (e) {
            over = true;
            return reject(e);
          }
          await new Promise((r) => setTimeout(r, 700));
        }
      };
      if (typeof EventSource === "undefined") return poll();
      const es = new EventSource(gen.links.events);
      for (const type of ["generation", "progress", "image"]) {
        es.addEventListener(type, (m) => onEvent(type, JSON.parse(m.data)));
      }
      es.addEventListener("done", (m) => {
        es.close();
        const g = JSON.parse(m.data).generation;
        if (finished(g)) end(g);
        else poll(); // the server stopped while the job was still queued or running
      });
      es.onerror = () => {
        if (over) return;
        es.close();
        poll();
      };
    });
  },
};
