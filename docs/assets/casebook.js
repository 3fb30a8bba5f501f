/* Perf Casebook: what the pages need beyond mkdocs-material, loaded at the end of every page.
 *
 * - Flame graphs (<object data-pc-src>) load when they come near the viewport, so a page's
 *   weight does not count figures a reader never scrolls to (labkit/macros.py flamegraph()).
 * - Recordings (<div data-pc-cast>) get an asciinema player with the options the macro wrote
 *   (labkit/macros.py cast()) when they come near the viewport; the player's script is named
 *   only on pages with a recording (<template id="pc-player-js">) and loaded then.
 * - Large folded blocks (<details> with a <div data-pc-fold>) are fetched when opened
 *   (labkit/mkdocs_hooks.py lazy_folds), with copy buttons on their code blocks and their tables
 *   wrapped as mkdocs-material wraps a page's; so is the content of a host tab other than the
 *   first when the reader shows it (lazy_tabs). Code annotations are never fetched: material
 *   builds them at load only (mkdocs_hooks.py _ANNOTATED).
 * - Names and keyboard access that mkdocs-material's runtime markup lacks: code annotation
 *   markers get a label, and a box that scrolls sideways (a table, a flame graph, a fetched code
 *   block) can be focused to scroll it.
 * - Host tabs (tab sets marked data-pc-tabs by labkit/mkdocs_hooks.py, which keeps
 *   mkdocs-material's runtime off them): they switch by CSS alone; here a pick is followed by
 *   every set with a tab of the same title, the set the reader clicked stays where it was on
 *   screen, and the pick is remembered (localStorage) for the next page.
 * - The light/dark toggle (labkit/theme/partials/palette.html, kept from mkdocs-material's
 *   runtime): a pick sets <body>'s data-md-color-* and is stored as material stores it
 *   (__md_set("__palette")), so material's inline start-up script applies it on every page.
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

  // Fitted to a phone's width, a 110-column recording has 5 px text. Where the fitted text
  // would be under CAST_MIN_PX, the player keeps CAST_MIN_PX text (its fit: false and
  // terminalFontSize options) and the recording scrolls sideways; a monospace column is about
  // 0.6 em wide.
  var CAST_MIN_PX = 10, CAST_COLUMN_EM = 0.6;

  function createPlayer(el) {
    if (el.hasAttribute("data-pc-ready")) {
      return;
    }
    el.setAttribute("data-pc-ready", "");
    withPlayer(function () {
      var opts = JSON.parse(el.getAttribute("data-pc-options") || "{}");
      if (opts.cols && el.clientWidth < opts.cols * CAST_MIN_PX * CAST_COLUMN_EM) {
        opts.fit = false;
        opts.terminalFontSize = CAST_MIN_PX + "px";
        el.classList.add("pc-cast-scroll");
        el.setAttribute("tabindex", "0"); // a region that scrolls can be focused to scroll it
        el.setAttribute("aria-label", el.getAttribute("aria-label") + " (scrolls sideways)");
      }
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

  // Boxes that may scroll sideways, each named by what it holds (data-pc-scrollbox): material's
  // table wrappers and flame graphs here; code blocks of fetched content are marked when they
  // arrive (fetchFold: material gives its own code blocks a tabindex when they scroll, at load).
  var SCROLL_BOXES = [[".md-typeset__scrollwrap", "Table"], [".pc-flamegraph-wrap", "Flame graph"]];

  // A box that scrolls sideways can be focused to scroll it (axe: scrollable-region-focusable).
  function markScroll(wraps, scrolls) {
    wraps.forEach(function (wrap, i) {
      var label = wrap.getAttribute("data-pc-scrollbox") + " (scrolls sideways)";
      if (scrolls[i]) {
        if (wrap.getAttribute("aria-label") !== label) {
          wrap.setAttribute("tabindex", "0");
          wrap.setAttribute("role", "region");
          wrap.setAttribute("aria-label", label);
        }
      } else if (wrap.getAttribute("tabindex") === "0") {
        wrap.removeAttribute("tabindex");
        wrap.removeAttribute("role");
        wrap.removeAttribute("aria-label");
      }
    });
  }

  // All sizes first, then all writes: one layout, not one per table.
  function checkScroll(wraps) {
    markScroll(wraps, wraps.map(function (wrap) { return wrap.scrollWidth > wrap.clientWidth + 1; }));
  }

  // At load, a box is measured when it comes near the viewport: the observer's callback runs
  // after the browser's own layout, so it reads sizes without forcing one. Measuring every
  // table at once forced a layout of the whole chapter, a 350 ms task on Lighthouse's
  // simulated phone (fio_engines).
  var wrapObserver = "IntersectionObserver" in window
    ? new IntersectionObserver(function (entries) {
        checkScroll(entries.filter(function (e) { return e.isIntersecting; }).map(function (e) { return e.target; }));
      }, { rootMargin: "600px 0px" })
    : null;

  function accessibility(root) {
    root.querySelectorAll(".md-annotation__index:not([aria-label])").forEach(function (a) {
      var id = a.querySelector("[data-md-annotation-id]");
      a.setAttribute("aria-label", "Annotation " + (id ? id.getAttribute("data-md-annotation-id") : ""));
    });
    SCROLL_BOXES.forEach(function (box) {
      root.querySelectorAll(box[0] + ":not([data-pc-scrollbox])").forEach(function (el) {
        el.setAttribute("data-pc-scrollbox", box[1]);
      });
    });
    var fresh = Array.prototype.slice.call(root.querySelectorAll("[data-pc-scrollbox]:not([data-pc-watched])"));
    // Until it is measured, a box can be focused (writes only: no layout); measured, it
    // stays focusable only if it scrolls.
    fresh.forEach(function (wrap) {
      wrap.setAttribute("data-pc-watched", "");
      wrap.setAttribute("tabindex", "0");
      wrap.setAttribute("role", "region");
      wrap.setAttribute("aria-label", wrap.getAttribute("data-pc-scrollbox"));
    });
    if (wrapObserver) {
      fresh.forEach(function (wrap) { wrapObserver.observe(wrap); });
    } else {
      checkScroll(fresh);
    }
  }

  // The reader changed something (a tab, the window's width): measure the boxes shown again.
  function recheckScroll() {
    checkScroll(Array.prototype.slice.call(document.querySelectorAll("[data-pc-scrollbox]")));
  }

  var TAB_KEY = "pc-host-tab";
  var picked = null; // the title of the reader's pick, on this page or remembered

  function tabTitle(set, input) {
    var label = set.querySelector(':scope > .tabbed-labels > label[for="' + input.id + '"]');
    return label ? label.textContent.trim() : "";
  }

  // Check, in every tab set but ``except``, the tab titled ``title`` (by the labels' text
  // content, so sets inside a closed <details> follow too). Writes only: no layout.
  function pickEverywhere(title, except) {
    document.querySelectorAll(".tabbed-set[data-pc-tabs]").forEach(function (set) {
      if (set === except) {
        return;
      }
      set.querySelectorAll(":scope > .tabbed-labels > label").forEach(function (l) {
        var target = document.getElementById(l.htmlFor);
        if (l.textContent.trim() === title && target && !target.checked) {
          target.checked = true;
        }
      });
    });
  }

  // After a pick, heights above the clicked set keep changing for a moment: a tab fetched when
  // shown (lazy_tabs) arrives, blocks render as they near the viewport (content-visibility).
  // Browsers with scroll anchoring keep the set in place; Safari has none. So for two seconds,
  // or until the reader scrolls or presses a key, each change of the content's size moves the page back by
  // what the clicked set moved. (A ResizeObserver runs after layout, before paint: no flicker.)
  var hold = null;
  var holdObserver = "ResizeObserver" in window
    ? new ResizeObserver(function () {
        if (!hold) {
          return;
        }
        if (performance.now() > hold.until) {
          releaseHold();
          return;
        }
        var d = hold.set.getBoundingClientRect().top - hold.top;
        if (Math.abs(d) > 1) {
          window.scrollBy(0, d);
        }
      })
    : null;

  function releaseHold() {
    hold = null;
    if (holdObserver) {
      holdObserver.disconnect();
    }
  }

  ["wheel", "touchmove", "keydown"].forEach(function (type) {
    window.addEventListener(type, function () {
      if (hold) {
        releaseHold();
      }
    }, { passive: true });
  });

  // The reader picked a tab: every set follows, and the set clicked keeps its place on screen
  // (tables above it change height as they switch).
  function followTab(input) {
    var set = input.closest(".tabbed-set[data-pc-tabs]");
    if (!set || !input.checked) {
      return;
    }
    var title = tabTitle(set, input);
    if (!title) {
      return;
    }
    picked = title;
    var before = set.getBoundingClientRect().top;
    pickEverywhere(title, set);
    var shift = set.getBoundingClientRect().top - before;
    if (Math.abs(shift) > 1) {
      window.scrollBy(0, shift);
    }
    if (holdObserver) {
      releaseHold();
      hold = { set: set, top: before, until: performance.now() + 2000 };
      holdObserver.observe(set.closest(".md-content") || document.body);
    }
    try {
      window.localStorage.setItem(TAB_KEY, title);
    } catch (e) { /* storage refused: the pick holds on this page only */ }
  }

  function restoreTab() {
    var title = null;
    try {
      title = window.localStorage.getItem(TAB_KEY);
    } catch (e) { /* no storage */ }
    if (title) {
      picked = title;
      pickEverywhere(title, null);
    }
  }

  function palette() {
    var form = document.querySelector("form[data-pc-palette]");
    if (!form) {
      return;
    }
    var inputs = Array.prototype.slice.call(form.querySelectorAll("input[name='__palette']"));
    if (!inputs.length) {
      return;
    }
    // Each option's label (its icon) switches to the next option: show the current one's.
    function show(index) {
      inputs.forEach(function (input, i) {
        var label = input.nextElementSibling;
        if (label && label.tagName === "LABEL") {
          label.hidden = i !== index;
        }
      });
    }
    var saved = typeof __md_get === "function" ? __md_get("__palette") : null;
    var index = saved && typeof saved.index === "number" && saved.index < inputs.length ? saved.index : 0;
    inputs[index].checked = true;
    show(index);
    form.addEventListener("change", function (e) {
      var i = inputs.indexOf(e.target);
      if (i < 0) {
        return;
      }
      var color = {};
      ["media", "scheme", "primary", "accent"].forEach(function (key) {
        color[key] = e.target.getAttribute("data-md-color-" + key);
        document.body.setAttribute("data-md-color-" + key, color[key]);
      });
      show(i);
      if (typeof __md_set === "function") {
        __md_set("__palette", { index: i, color: color });
      }
    });
    // As material does: Enter on the toggle picks the next scheme.
    form.addEventListener("keydown", function (e) {
      if (e.key !== "Enter") {
        return;
      }
      var i = inputs.findIndex(function (input) { return input.checked; });
      var next = inputs[(i + 1) % inputs.length];
      next.click();
      next.focus();
      e.preventDefault();
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

  // Wrap the tables of fetched content as mkdocs-material wraps a page's tables at load (its
  // renderTable): the wrapper scrolls, and casebook.css and accessibility() expect it.
  function wrapTables(root) {
    root.querySelectorAll("table:not([class])").forEach(function (table) {
      var wrap = document.createElement("div");
      var inner = document.createElement("div");
      wrap.className = "md-typeset__scrollwrap";
      inner.className = "md-typeset__table";
      table.parentNode.insertBefore(wrap, table);
      inner.appendChild(table);
      wrap.appendChild(inner);
    });
  }

  // Replace a placeholder (<div class="pc-fold" data-pc-fold="fold-....html">) with the
  // fragment it names: a folded block's contents or another host's tab.
  function fetchFold(holder) {
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
        wrapTables(box);
        box.querySelectorAll("pre > code").forEach(function (code) {
          code.setAttribute("data-pc-scrollbox", "Code");
        });
        var parent = holder.parentNode;
        while (box.firstChild) {
          parent.insertBefore(box.firstChild, holder);
        }
        holder.remove();
        if (picked) {
          pickEverywhere(picked, null); // tab sets in the fetched block follow the pick too
        }
        all();
      })
      .catch(function (err) {
        holder.removeAttribute("data-pc-loading");
        holder.firstChild.textContent = "Could not load this block (" + err.message + "): ";
      });
  }

  function openFold(details) {
    fetchFold(details.querySelector(":scope > .pc-fold[data-pc-fold]"));
  }

  // Another host's tab (labkit/mkdocs_hooks.py lazy_tabs) is fetched when it is shown: a hidden
  // tab (display: none) never intersects the viewport, a shown one does once near it.
  var tabObserver = "IntersectionObserver" in window
    ? new IntersectionObserver(function (entries) {
        entries.forEach(function (e) {
          if (e.isIntersecting) {
            tabObserver.unobserve(e.target);
            fetchFold(e.target);
          }
        });
      }, { rootMargin: "600px 0px" })
    : null;

  function lazyTabs(root) {
    root.querySelectorAll(".tabbed-block > .pc-fold[data-pc-fold]:not([data-pc-watched])").forEach(function (holder) {
      holder.setAttribute("data-pc-watched", "");
      if (tabObserver) {
        tabObserver.observe(holder);
      } else {
        fetchFold(holder);
      }
    });
  }

  function all() {
    lazyTabs(document);
    flameGraphs(document);
    players(document);
    accessibility(document);
  }

  // mkdocs-material builds annotations and table wrappers when its document$ emits; run after it.
  if (typeof document$ !== "undefined" && document$.subscribe) {
    document$.subscribe(function () { setTimeout(all, 0); });
  }
  // The script runs at the end of <body>: every tab set is parsed; pick before the first paint.
  restoreTab();
  palette();
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
    if (e.target && e.target.matches && e.target.matches(".tabbed-set[data-pc-tabs] > input")) {
      followTab(e.target);
    }
    setTimeout(recheckScroll, 50);
  });
  window.addEventListener("resize", recheckScroll);
})();
