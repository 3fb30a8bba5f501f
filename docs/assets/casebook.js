/* Perf Casebook: what the pages need beyond mkdocs-material (deferred: labkit/site/theme/main.html).
 *
 * - Flame graphs (<object data-pc-src>) load when they come near the viewport, so a page's
 *   weight does not count figures a reader never scrolls to (labkit/site/macros/figures.py flamegraph()).
 * - Recordings (<div data-pc-cast>) get an asciinema player with the options the macro wrote
 *   (labkit/site/macros/figures.py cast()) when they come near the viewport; the player's script is named
 *   only on pages with a recording (<template id="pc-player-js">, labkit/site/theme/main.html) and
 *   loaded then.
 * - On evidence pages (labkit/site/mkdocs_hooks.py LAZY_PAGES), another host's tab and a large
 *   closed block are fragments fetched when the tab is shown or the block opened, their code
 *   and tables given the copy buttons and scroll wrappers mkdocs-material gives a page's at load.
 * - Names and keyboard access that mkdocs-material's markup lacks: the search dialog and code
 *   annotation markers get a name, and a box that scrolls sideways (a table, a flame graph) can
 *   be focused to scroll it (axe: scrollable-region-focusable).
 * - Host tabs (tab sets marked data-pc-tabs by labkit/site/page_marks.py, which keeps
 *   mkdocs-material's runtime off them): they switch by CSS alone; here a pick is followed by
 *   every set with a tab of the same title, the set the reader clicked stays where it was on
 *   screen, and the pick is remembered (localStorage) for the next page.
 * - The light/dark toggle (labkit/site/theme/partials/palette.html, kept from mkdocs-material's
 *   runtime): a pick sets <body>'s data-md-color-* and is stored as material stores it
 *   (__md_set("__palette")), so material's inline script applies it before the next page's
 *   first paint (labkit/site/theme/partials/javascripts/palette.html); the option
 *   "(prefers-color-scheme)" follows the system's scheme, also when the system changes it.
 */
(function () {
  "use strict";

  // Call fn(element) once for each element when it comes within margin of the viewport (at
  // once without IntersectionObserver).
  function whenNear(elements, margin, fn) {
    if (!("IntersectionObserver" in window)) {
      elements.forEach(fn);
      return;
    }
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) {
          observer.unobserve(e.target);
          fn(e.target);
        }
      });
    }, { rootMargin: margin + " 0px" });
    elements.forEach(function (el) { observer.observe(el); });
  }

  function flameGraphs() {
    var objects = Array.prototype.slice.call(document.querySelectorAll("object[data-pc-src]:not([data])"));
    whenNear(objects, "300px", function (obj) {
      obj.setAttribute("data", obj.getAttribute("data-pc-src"));
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

  function players() {
    var casts = Array.prototype.slice.call(document.querySelectorAll("[data-pc-cast]:not([data-pc-ready])"));
    casts.forEach(function (el) { el.setAttribute("data-pc-ready", ""); });
    whenNear(casts, "600px", createPlayer);
  }

  // Boxes that may scroll sideways, each named by what it holds: table wrappers, flame graphs,
  // and the code blocks of fetched fragments (material makes its own focusable at load).
  var SCROLL_BOXES = [[".md-typeset__scrollwrap", "Table"], [".pc-flamegraph-wrap", "Flame graph"],
                      ["pre > code[data-pc-fetched]", "Code"]];

  // A box that scrolls sideways is focusable, as a named region; one that does not, is not.
  // All sizes are read first, then all attributes written: one layout.
  function measure(boxes) {
    var scrolls = boxes.map(function (el) { return el.scrollWidth > el.clientWidth + 1; });
    boxes.forEach(function (el, i) {
      if (scrolls[i]) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("role", "region");
        el.setAttribute("aria-label", el.getAttribute("data-pc-scrollbox") + " (scrolls sideways)");
      } else if (el.hasAttribute("tabindex")) {
        el.removeAttribute("tabindex");
        el.removeAttribute("role");
        el.removeAttribute("aria-label");
      }
    });
  }

  // A box is measured when it comes near the viewport (a hidden tab's or a closed block's, once
  // shown): the observer's callback runs after the browser's own layout, and reading the size
  // of a box far away would lay out the blocks a data page leaves unrendered until then
  // (content-visibility, docs/assets/casebook.css). Until measured, a box can be focused.
  var near = new Set();
  var boxObserver = "IntersectionObserver" in window
    ? new IntersectionObserver(function (entries) {
        var fresh = [];
        entries.forEach(function (e) {
          if (e.isIntersecting) {
            near.add(e.target);
            fresh.push(e.target);
          } else {
            near.delete(e.target);
          }
        });
        measure(fresh);
      }, { rootMargin: "600px 0px" })
    : null;

  function scrollBoxes() {
    var fresh = [];
    SCROLL_BOXES.forEach(function (box) {
      document.querySelectorAll(box[0] + ":not([data-pc-scrollbox])").forEach(function (el) {
        el.setAttribute("data-pc-scrollbox", box[1]);
        el.setAttribute("tabindex", "0");
        el.setAttribute("role", "region");
        el.setAttribute("aria-label", box[1]);
        fresh.push(el);
      });
    });
    if (boxObserver) {
      fresh.forEach(function (el) { boxObserver.observe(el); });
    } else {
      measure(fresh);
    }
  }

  // The reader changed something (a tab, a block, the window's width): measure the boxes near.
  function remeasure() {
    measure(boxObserver ? Array.from(near) : Array.prototype.slice.call(document.querySelectorAll("[data-pc-scrollbox]")));
  }

  function names() {
    var search = document.querySelector('.md-search[role="dialog"]:not([aria-label])');
    if (search) {
      search.setAttribute("aria-label", "Search");
    }
    document.querySelectorAll(".md-annotation__index:not([aria-label])").forEach(function (a) {
      var id = a.querySelector("[data-md-annotation-id]");
      a.setAttribute("aria-label", "Annotation " + (id ? id.getAttribute("data-md-annotation-id") : ""));
    });
  }

  var TAB_KEY = "pc-host-tab";
  var picked = null; // the title of the reader's pick, on this page or remembered
  var hold = null;   // the set the reader just clicked ({set, top, y}), kept where it is on screen

  // Keep the held set at its place on screen: anything above it that changes height after the
  // pick (other hosts' tabs fetched, recordings and flame graphs loading, boxes re-measured, on
  // any schedule a busy machine gives them) is paid for by scrolling by the same amount.
  function keepHeld() {
    if (!hold) {
      return;
    }
    var shift = hold.set.getBoundingClientRect().top - hold.top;
    if (Math.abs(shift) > 1) {
      window.scrollBy(0, shift);
    }
    hold.y = window.scrollY;
  }

  // The hold ends when the reader moves the page: a wheel, a touch, a key, a press, or a scroll
  // this script did not make (a scroll bar dragged).
  function release() {
    hold = null;
  }
  ["wheel", "touchstart", "keydown", "mousedown"].forEach(function (type) {
    window.addEventListener(type, release, { capture: true, passive: true });
  });
  window.addEventListener("scroll", function () {
    if (hold && Math.abs(window.scrollY - hold.y) > 1) {
      release();
    }
  }, { passive: true });
  if (typeof ResizeObserver !== "undefined") { // the page's height changes when a block above does
    new ResizeObserver(keepHeld).observe(document.body);
  }

  // Check, in every tab set but except, the tab titled title (the labels' text content: no
  // layout; sets inside a closed <details> follow too).
  function pickEverywhere(title, except) {
    document.querySelectorAll(".tabbed-set[data-pc-tabs]").forEach(function (set) {
      if (set === except) {
        return;
      }
      set.querySelectorAll(":scope > .tabbed-labels > label").forEach(function (label) {
        var input = document.getElementById(label.htmlFor);
        if (input && !input.checked && label.textContent.trim() === title) {
          input.checked = true;
        }
      });
    });
  }

  // The reader picked a tab: every set follows, and the set clicked keeps its place on screen
  // (sets above it change height as they switch).
  function followTab(input) {
    var set = input.closest(".tabbed-set[data-pc-tabs]");
    var label = set && set.querySelector(':scope > .tabbed-labels > label[for="' + input.id + '"]');
    if (!label || !input.checked) {
      return;
    }
    var title = label.textContent.trim();
    hold = { set: set, top: set.getBoundingClientRect().top, y: window.scrollY };
    picked = title;
    pickEverywhere(title, set);
    keepHeld();
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

  var fetchedCode = 0;

  // What mkdocs-material does to a page's code and tables at load, done to a fetched fragment:
  // a copy button on each code block (material's clipboard handler is delegated, so it works)
  // and a scroll wrapper around each table.
  function asMaterialDoes(box) {
    box.querySelectorAll(".highlight > pre").forEach(function (pre) {
      var code = pre.querySelector(":scope > code");
      if (!code || pre.querySelector(".md-code__nav")) {
        return;
      }
      code.setAttribute("data-pc-fetched", "");
      pre.id = pre.id || "__pc_code_" + (fetchedCode += 1);
      var nav = document.createElement("nav"), button = document.createElement("button");
      nav.className = "md-code__nav";
      button.className = "md-code__button";
      button.title = "Copy to clipboard";
      button.setAttribute("data-clipboard-target", "#" + pre.id + " > code");
      button.setAttribute("data-md-type", "copy");
      nav.appendChild(button);
      pre.insertBefore(nav, code);
    });
    box.querySelectorAll("table:not([class])").forEach(function (table) {
      var wrap = document.createElement("div"), inner = document.createElement("div");
      wrap.className = "md-typeset__scrollwrap";
      inner.className = "md-typeset__table";
      table.parentNode.insertBefore(wrap, table);
      inner.appendChild(table);
      wrap.appendChild(inner);
    });
  }

  // Replace a placeholder (<div class="pc-fold" data-pc-fold="fold-....html">) with the
  // fragment it names: another host's tab, or a closed block's contents.
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
        asMaterialDoes(box);
        while (box.firstChild) {
          holder.parentNode.insertBefore(box.firstChild, holder);
        }
        holder.remove();
        if (picked) {
          pickEverywhere(picked, null); // tab sets in the fragment follow the pick too
        }
        keepHeld(); // a tab fetched above the set the reader clicked
        all();
      })
      .catch(function (err) {
        holder.removeAttribute("data-pc-loading");
        holder.firstChild.textContent = "Could not load this block (" + err.message + "): ";
      });
  }

  // Another host's tab is fetched once shown near the viewport (a hidden tab never intersects).
  function lazyTabs() {
    var holders = Array.prototype.slice.call(document.querySelectorAll(".tabbed-block > .pc-fold:not([data-pc-watched])"));
    holders.forEach(function (h) { h.setAttribute("data-pc-watched", ""); });
    whenNear(holders, "600px", fetchFold);
  }

  function palette() {
    var form = document.querySelector("form[data-pc-palette]");
    var inputs = form ? Array.prototype.slice.call(form.querySelectorAll("input[name='__palette']")) : [];
    if (!inputs.length) {
      return;
    }
    var light = window.matchMedia("(prefers-color-scheme: light)");
    // An option's colours; "(prefers-color-scheme)" takes the light or the dark option's, as
    // material resolves it.
    function colorOf(input) {
      var color = {}, from = input;
      if (input.getAttribute("data-md-color-media") === "(prefers-color-scheme)") {
        from = form.querySelector(light.matches ? "[data-md-color-media='(prefers-color-scheme: light)']"
                                                : "[data-md-color-media='(prefers-color-scheme: dark)']") || input;
      }
      ["media", "scheme", "primary", "accent"].forEach(function (key) {
        color[key] = (key === "media" ? input : from).getAttribute("data-md-color-" + key);
      });
      return color;
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
    var current;
    function apply(index) {
      var color = colorOf(inputs[index]);
      current = index;
      Object.keys(color).forEach(function (key) {
        document.body.setAttribute("data-md-color-" + key, color[key]);
      });
      show(index);
      if (typeof __md_set === "function") {
        __md_set("__palette", { index: index, color: color });
      }
    }
    // <body> already has the scheme (material's inline script): only the toggle is shown here.
    var saved = typeof __md_get === "function" ? __md_get("__palette") : null;
    current = saved && typeof saved.index === "number" && saved.index < inputs.length ? saved.index
      : Math.max(0, inputs.findIndex(function (input) {
        return window.matchMedia(input.getAttribute("data-md-color-media")).matches;
      }));
    inputs[current].checked = true;
    show(current);
    form.addEventListener("change", function (e) {
      var i = inputs.indexOf(e.target);
      if (i >= 0) {
        apply(i);
      }
    });
    // As material does: Enter on the toggle picks the next option.
    form.addEventListener("keydown", function (e) {
      if (e.key !== "Enter") {
        return;
      }
      var next = inputs[(current + 1) % inputs.length];
      next.click();
      next.focus();
      e.preventDefault();
    });
    light.addEventListener("change", function () {
      if (inputs[current].getAttribute("data-md-color-media") === "(prefers-color-scheme)") {
        apply(current);
      }
    });
  }

  function all() {
    lazyTabs();
    flameGraphs();
    players();
    names();
    scrollBoxes();
  }

  // The script runs once the document is parsed (deferred): pick before material's start-up.
  restoreTab();
  palette();
  // mkdocs-material builds table wrappers and annotations when its document$ emits; run after it.
  if (typeof document$ !== "undefined" && document$.subscribe) {
    document$.subscribe(function () { setTimeout(all, 0); });
  } else {
    document.addEventListener("DOMContentLoaded", all);
  }
  // A tab shown, a block opened or a window resized can make a box scroll (or stop scrolling).
  var pending = 0;
  function later() {
    clearTimeout(pending);
    pending = setTimeout(remeasure, 50);
  }
  document.addEventListener("change", function (e) {
    if (e.target && e.target.matches && e.target.matches(".tabbed-set[data-pc-tabs] > input")) {
      followTab(e.target);
    }
    later();
  });
  document.addEventListener("toggle", function (e) { // <details> fires "toggle" on itself only
    if (e.target.tagName === "DETAILS" && e.target.open) {
      fetchFold(e.target.querySelector(":scope > .pc-fold"));
    }
    later();
  }, true);
  window.addEventListener("resize", later);
})();
