// Declares the functions tandem.wasm imports from its host (web/loader.js provides them).
mergeInto(LibraryManager.library, {
  tdm_now_ms: function () { return performance.now(); },
});
