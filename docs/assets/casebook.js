/* Perf Casebook: what the pages need beyond mkdocs-material, loaded at the end of every page.
 *
 * - Flame graphs (<object data-pc-src>) load when they come near the viewport, so a page's
 *   weight does not count figures a reader never scrolls to (labkit/macros.py flamegraph()).
 * - Recordings (<div data-pc-cast>) get an asciinema player with the options the macro wrote
 *   (labkit/macros.py cast()) when they come near the viewport; the player's script is named
 *   only on pages with a recording (<template id="pc-player-js">) and loaded then.
 * - Large folded blocks (<details> with a <div data-pc-fold>) are fetched when opened
 *   (labkit/mkdocs_hooks.py lazy_folds), with copy buttons on their code blocks.
 * - Names and keyboard access that mkdocs-material's runtime markup lacks: code annotation
 *   markers get a label, and a table that scrolls sideways can be focused to scroll it.
 */
(function () {
  "use strict";

  var lazyObserver = "IntersectionObserver" in window
    ? new IntersectionObserver(function (entries) {
        entries.forEach(function (e) {
          if (e.isIntersecting) {
            load(e.target);
            lazyObserver.unobserve(e.target);
          }
        });
      }, { rootMargin: "300px 0px" })
    : null;

  function load(obj) {
    var src = obj.getAttribute("data-pc-src");
    if (src && !obj.getAttribute("data")) {
      obj.setAttribute("data", src);
    }
  }

  function flameGraphs(root) {
    root.querySelectorAll("object[data-pc-src]:not([data])").forEach(function (obj) {
      if (lazyObserver) {
        lazyObserver.observe(obj);
      } else {
        load(obj);
      }
    });
  }

  var playerScript = null;

  // The player's script (~185 KB) loads when the first recording comes near the viewport.
  function withPlayer(done) {
    if (typeof AsciinemaPlayer !== "undefined") {
      done();
      return;
    }
    if (!playerScript) {
      var ref = document.getElementById("pc-player-js");
      if (!ref) {
        return;
      }
      playerScript = document.createElement("script");
      playerScript.src = ref.getAttribute("data-src");
      document.body.appendChild(playerScript);
    }
    playerScript.addEventListener("load", done);
  }

  function createPlayer(el) {
    if (el.hasAttribute("data-pc-ready")) {
      return;
    }
    el.setAttribute("data-pc-ready", "");
    withPlayer(function () {
      var opts = JSON.parse(el.getAttribute("data-pc-options") || "{}");
      AsciinemaPlayer.create(el.getAttribute("data-pc-cast"), el, opts);
    });
  }

  var castObserver = "IntersectionObserver" in window
    ? new IntersectionObserver(function (entries) {
        entries.forEach(function (e) {
          if (e.isIntersecting) {
            createPlayer(e.target);
            castObserver.unobserve(e.target);
          }
        });
      }, { rootMargin: "600px 0px" })
    : null;

  function players(root) {
    root.querySelectorAll("[data-pc-cast]:not([data-pc-ready])").forEach(function (el) {
      if (castObserver) {
        castObserver.observe(el);
      } else {
        createPlayer(el);
      }
    });
  }

  function accessibility(root) {
    root.querySelectorAll(".md-annotation__index:not([aria-label])").forEach(function (a) {
      var id = a.querySelector("[data-md-annotation-id]");
      a.setAttribute("aria-label", "Annotation " + (id ? id.getAttribute("data-md-annotation-id") : ""));
    });
    root.querySelectorAll(".md-typeset__scrollwrap").forEach(function (wrap) {
      if (wrap.scrollWidth > wrap.clientWidth + 1) {
        wrap.setAttribute("tabindex", "0");
        wrap.setAttribute("role", "region");
        wrap.setAttribute("aria-label", "Table (scrolls sideways)");
      } else if (wrap.getAttribute("tabindex") === "0") {
        wrap.removeAttribute("tabindex");
        wrap.removeAttribute("role");
        wrap.removeAttribute("aria-label");
      }
    });
  }

  // mkdocs-material links tabs of the same title by their rendered text, which is empty for
  // tab sets inside a closed <details>: those would keep the old host when opened. Follow the
  // reader's pick there too, by the labels' text content.
  function followTab(input) {
    var set = input.closest(".tabbed-set");
    if (!set || !input.checked) {
      return;
    }
    var label = set.querySelector('.tabbed-labels > label[for="' + input.id + '"]');
    var title = label ? label.textContent.trim() : "";
    if (!title) {
      return;
    }
    document.querySelectorAll(".tabbed-set").forEach(function (other) {
      if (other === set) {
        return;
      }
      other.querySelectorAll(":scope > .tabbed-labels > label").forEach(function (l) {
        var target = document.getElementById(l.htmlFor);
        if (l.textContent.trim() === title && target && !target.checked) {
          target.checked = true;
        }
      });
    });
  }

  var foldCode = 0;

  // Copy buttons as mkdocs-material puts them on code blocks at page load (its clipboard
  // handler is delegated, so the same markup works on code fetched later).
  function copyButtons(root) {
    root.querySelectorAll(".highlight > pre").forEach(function (pre) {
      if (pre.querySelector(".md-code__nav") || !pre.querySelector("code")) {
        return;
      }
      if (!pre.id) {
        pre.id = "__pc_fold_code_" + (foldCode += 1);
      }
      var nav = document.createElement("nav");
      nav.className = "md-code__nav";
      var button = document.createElement("button");
      button.className = "md-code__button";
      button.title = "Copy to clipboard";
      button.setAttribute("data-clipboard-target", "#" + pre.id + " > code");
      button.setAttribute("data-md-type", "copy");
      nav.appendChild(button);
      pre.insertBefore(nav, pre.firstChild);
    });
  }

  function openFold(details) {
    var holder = details.querySelector(":scope > .pc-fold[data-pc-fold]");
    if (!holder || holder.hasAttribute("data-pc-loading")) {
      return;
    }
    holder.setAttribute("data-pc-loading", "");
    fetch(holder.getAttribute("data-pc-fold"))
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status)); })
      .then(function (html) {
        var box = document.createElement("div");
        box.innerHTML = html;
        copyButtons(box);
        while (box.firstChild) {
          details.insertBefore(box.firstChild, holder);
        }
        holder.remove();
        all();
      })
      .catch(function (err) {
        holder.removeAttribute("data-pc-loading");
        holder.firstChild.textContent = "Could not load this block (" + err.message + "): ";
      });
  }

  function all() {
    flameGraphs(document);
    players(document);
    accessibility(document);
  }

  // mkdocs-material builds annotations and table wrappers when its document$ emits; run after it.
  if (typeof document$ !== "undefined" && document$.subscribe) {
    document$.subscribe(function () { setTimeout(all, 0); });
  }
  document.addEventListener("DOMContentLoaded", function () { setTimeout(all, 0); });
  window.addEventListener("load", all);
  // <details> fires "toggle" on itself only: listen in the capture phase.
  document.addEventListener("toggle", function (e) {
    if (e.target.tagName === "DETAILS" && e.target.open) {
      openFold(e.target);
    }
  }, true);
  // A tab shown or a window resized can make a table scroll (or stop scrolling).
  document.addEventListener("change", function (e) {
    if (e.target && e.target.matches && e.target.matches(".tabbed-set > input")) {
      followTab(e.target);
    }
    setTimeout(function () { accessibility(document); }, 50);
  });
  window.addEventListener("resize", function () { accessibility(document); });
})();
