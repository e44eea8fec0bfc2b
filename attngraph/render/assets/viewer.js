/* attngraph's viewer (attngraph/render/html.py writes the page). Everything it shows comes from the JSON in
   #attngraph-data: {boxes: [{id, frame, title, text, kind, fill, stroke, flops}], frames: [{id, parent, kind,
   label, folded, backward}], edges: [[tail, head, shape]], ties: [[forward, backward]], details: {id: fields},
   attention: [{scope, queries[example], keys[example], weights[example][head][query][key], image}], note}.

   The graph: boxes sit in nested frames (module calls, and chains of identical blocks); the page lays them out
   itself, frame by frame from the innermost, so a fold or an unfold lays it out again. A camera zooms and pans
   it, an overview map shows where the view is, a search finds boxes and a click shows a box's details.
   The attention: bertviz's head view (lines), the weights over the picture whose cells the keys are, and
   bertviz's model view (every module × head as a small map). */
(function () {
  "use strict";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const HEAD_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                       "#bcbd22", "#17becf", "#393b79", "#ad494a"];
  const FIELDS = ["kind", "op", "name", "shape", "dtype", "FLOPs", "scope", "source", "ops", "parameters", "inputs",
                  "attributes", "gradient of", "body"];
  const LOOK = {box: 34, module: 40, pad: 10, header: 22, rankGap: 30, gap: 16};   // sizes in pixels
  const data = JSON.parse(document.getElementById("attngraph-data").textContent);

  function element(tag, attributes = {}, ...children) {
    const made = document.createElement(tag);
    Object.entries(attributes).forEach(([key, value]) => made.setAttribute(key, value));
    made.append(...children);
    return made;
  }

  function svgElement(tag, attributes = {}, text = "") {
    const made = document.createElementNS(SVG_NS, tag);
    Object.entries(attributes).forEach(([key, value]) => made.setAttribute(key, value));
    if (text) made.textContent = text;
    return made;
  }

  function button(label, title, action) {
    const made = element("button", {type: "button", title}, label);
    made.addEventListener("click", action);
    return made;
  }

  const measure = document.createElement("canvas").getContext("2d"), widths = new Map();
  function textWidth(text, font) {      // measured once per text and font: a layout asks again and again
    const key = `${font}\n${text}`;
    if (!widths.has(key)) {
      measure.font = font;
      widths.set(key, measure.measureText(text).width);
    }
    return widths.get(key);
  }

  /* ---- the tree of frames and boxes ---- */

  function buildTree() {
    const frames = new Map(data.frames.map(f => [f.id, {...f, children: [], boxes: 0, flops: 0}]));
    const boxes = new Map(data.boxes.map((b, order) => [b.id, {...b, order}]));
    const root = {id: "", children: [], folded: false};
    const frameOf = id => id === "" ? root : frames.get(id);
    frames.forEach(f => frameOf(f.parent).children.push(f.id));
    boxes.forEach(b => frameOf(b.frame).children.push(b.id));
    const chains = new Map();       // frame id -> its frames, outermost first, itself last
    const chainOf = id => {
      if (id === "") return [];
      if (!chains.has(id)) chains.set(id, [...chainOf(frames.get(id).parent), id]);
      return chains.get(id);
    };
    boxes.forEach(b => chainOf(b.frame).forEach(id => {
      frames.get(id).boxes += b.kind === "call" ? 1 : 0;
      frames.get(id).flops += b.flops;
    }));
    const firstOrder = new Map();   // frame id -> the order of its first box: frames are laid out in this order
    boxes.forEach(b => chainOf(b.frame).forEach(id => firstOrder.has(id) || firstOrder.set(id, b.order)));
    frames.forEach(f => { f.order = firstOrder.get(f.id) ?? 0; });
    return {frames, boxes, root, frameOf, chainOf,
      pathOf: id => boxes.has(id) ? [...chainOf(boxes.get(id).frame), id] : chainOf(id)};
  }

  /* The box or folded frame standing for `id` (a box or frame): its outermost folded frame, else itself. */
  function visibleOf(tree, id) {
    return tree.pathOf(id).find(part => tree.frames.has(part) && tree.frames.get(part).folded) ?? id;
  }

  /* The edges between what is visible: drawn from box (or folded frame) to box, and, for the layout, between
     the two children of the innermost frame holding both ends. */
  function liftEdges(tree) {
    const drawn = new Map(), levels = new Map();
    data.edges.forEach(([tail, head, shape]) => {
      const from = visibleOf(tree, tail), to = visibleOf(tree, head);
      if (from === to) return;
      const a = tree.pathOf(from), b = tree.pathOf(to);
      let i = 0;
      while (a[i] === b[i]) i += 1;
      const level = i ? a[i - 1] : "";
      if (!levels.has(level)) levels.set(level, new Set());
      levels.get(level).add(`${a[i]}\n${b[i]}`);
      drawn.has(`${from}\n${to}`) || drawn.set(`${from}\n${to}`, {tail: from, head: to, shape});
    });
    return {drawn: [...drawn.values()], levels};
  }

  /* ---- the layout: each open frame's children in ranks, top to bottom ---- */

  function boxSize(tree, id) {
    if (tree.boxes.has(id)) {
      const box = tree.boxes.get(id);
      return {width: Math.max(textWidth(box.title, "bold 11px sans-serif"), textWidth(box.text, "9px sans-serif")) + 18,
              height: LOOK.box};
    }
    const frame = tree.frames.get(id);
    return {width: Math.max(textWidth(foldedTitle(frame), "bold 11px sans-serif"),
                            textWidth(foldedText(frame), "9px sans-serif")) + 22, height: LOOK.module};
  }

  const foldedTitle = frame => `▸ ${frame.label}`;
  const foldedText = frame => `${frame.boxes} op${frame.boxes === 1 ? "" : "s"} · ${countText(frame.flops)} FLOPs`;
  const countText = n => n >= 1e9 ? `${(n / 1e9).toFixed(1)}G` : n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` :
    n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : `${n}`;

  /* Ranks by longest path from the sources along the edges that go forward in the order of the boxes (so a
     loop drawn folded cannot cycle); a source sits just above its first user. */
  function rankItems(items, edges) {
    const preds = new Map(items.map(item => [item.id, []])), succs = new Map(items.map(item => [item.id, []]));
    const order = new Map(items.map(item => [item.id, item.order]));
    edges.forEach(([a, b]) => {
      if (order.get(a) < order.get(b)) { preds.get(b).push(a); succs.get(a).push(b); }
    });
    const rank = new Map();
    items.forEach(item => rank.set(item.id, Math.max(0, ...preds.get(item.id).map(p => rank.get(p) + 1))));
    items.filter(item => !preds.get(item.id).length && succs.get(item.id).length)
      .forEach(item => rank.set(item.id, Math.max(0, Math.min(...succs.get(item.id).map(s => rank.get(s))) - 1)));
    return {rank, preds};
  }

  /* Positions (top left) of items of known sizes: ranks stacked down; in a rank, each item as near as it can
     be to the mean centre of its predecessors, in that order, without overlaps. */
  function placeItems(items, edges) {
    const {rank, preds} = rankItems(items, edges);
    const ranks = [];
    items.forEach(item => (ranks[rank.get(item.id)] ??= []).push(item));
    const centre = new Map(), place = new Map();
    let top = 0;
    ranks.filter(Boolean).forEach(row => {
      let last = 0;
      const keyed = row.map(item => {
        const placed = preds.get(item.id).filter(p => centre.has(p)).map(p => centre.get(p));
        last = placed.length ? placed.reduce((s, x) => s + x, 0) / placed.length : last + 1e-3;
        return {item, key: last};
      }).sort((a, b) => a.key - b.key);
      let right = -Infinity;
      keyed.forEach(entry => {
        entry.x = Math.max(entry.key - entry.item.width / 2, right + LOOK.gap);
        right = entry.x + entry.item.width;
      });
      const shift = keyed.reduce((s, e) => s + e.key - (e.x + e.item.width / 2), 0) / keyed.length;
      const height = Math.max(...row.map(item => item.height));
      keyed.forEach(({item, x}) => {
        place.set(item.id, {x: x + shift, y: top});
        centre.set(item.id, x + shift + item.width / 2);
      });
      top += height + LOOK.rankGap;
    });
    const left = Math.min(...[...place.values()].map(p => p.x));
    place.forEach(p => { p.x -= left; });
    const width = Math.max(...items.map(item => place.get(item.id).x + item.width));
    return {place, width, height: Math.max(0, top - LOOK.rankGap)};
  }

  /* The layout of an open frame's contents, relative to its top left: {width, height, items: [{id, x, y,
     width, height, open, inner}]}. */
  function layoutFrame(tree, frame, levels) {
    const items = frame.children.map(id => {
      const child = tree.frames.get(id);
      const inner = child && !child.folded ? layoutFrame(tree, child, levels) : null;
      const title = inner ? textWidth(openTitle(child), "bold 10px sans-serif") : 0;
      const size = inner ? {width: Math.max(inner.width, title) + 2 * LOOK.pad,
                            height: inner.height + LOOK.header + LOOK.pad} : boxSize(tree, id);
      const {order, backward} = child ?? tree.boxes.get(id);
      return {id, ...size, inner, order, backward};
    }).sort((a, b) => a.order - b.order);
    const edges = [...(levels.get(frame.id) ?? [])].map(pair => pair.split("\n"));
    const passes = [items.filter(item => !item.backward), items.filter(item => item.backward)].filter(p => p.length);
    let width = 0, height = 0;
    passes.forEach(pass => {        // the backward pass to the right of the forward one
      const ids = new Set(pass.map(item => item.id));
      const placed = placeItems(pass, edges.filter(([a, b]) => ids.has(a) && ids.has(b)));
      const left = width ? width + 4 * LOOK.gap : 0;
      pass.forEach(item => Object.assign(item, placed.place.get(item.id), {x: placed.place.get(item.id).x + left}));
      width = left + placed.width;
      height = Math.max(height, placed.height);
    });
    return {width, height, items};
  }

  const openTitle = frame => frame.kind === "repeat" ? `▾ ${frame.label} · click to roll` : `▾ ${frame.label}`;

  /* Absolute rectangles of every visible box and open frame: id -> {x, y, width, height, open}. */
  function flatten(layout, x0, y0, into = new Map()) {
    layout.items.forEach(item => {
      const x = x0 + item.x, y = y0 + item.y;
      into.set(item.id, {x, y, width: item.width, height: item.height, open: Boolean(item.inner)});
      if (item.inner) flatten(item.inner, x + LOOK.pad, y + LOOK.header, into);
    });
    return into;
  }

  function layOut(tree) {
    const edges = liftEdges(tree);
    const layout = layoutFrame(tree, tree.root, edges.levels);
    return {rects: flatten(layout, LOOK.pad, LOOK.pad), edges: edges.drawn,
            width: layout.width + 2 * LOOK.pad, height: layout.height + 2 * LOOK.pad};
  }

  /* ---- drawing the layout ---- */

  function drawFrame(frame, r) {
    const g = svgElement("g", {class: `frame ${frame.kind}${frame.backward ? " backward" : ""}`, "data-id": frame.id});
    g.append(svgElement("rect", {x: r.x, y: r.y, width: r.width, height: r.height, rx: 7}),
             svgElement("text", {class: "frame-title", x: r.x + 8, y: r.y + 15}, openTitle(frame)),
             svgElement("title", {}, `${data.details[frame.id].title}: click the name to fold`));
    return g;
  }

  function drawBox(tree, id, r) {
    const box = tree.boxes.get(id), frame = tree.frames.get(id);
    const g = svgElement("g", {class: box ? `box ${box.kind}` : `box module ${frame.kind}`, "data-id": id});
    const face = {x: r.x, y: r.y, width: r.width, height: r.height};
    if (frame) g.append(svgElement("rect", {class: "depth", ...face, x: r.x + 3, y: r.y + 3, rx: 4}));
    g.append(svgElement("rect", {class: "face", ...face, rx: box ? 5 : 4,
                                 ...(box ? {fill: box.fill, stroke: box.stroke} : {})}),
             svgElement("text", {class: "title", x: r.x + r.width / 2, y: r.y + 15},
                        box ? box.title : foldedTitle(frame)),
             svgElement("text", {class: "text", x: r.x + r.width / 2, y: r.y + (box ? 27 : 30)},
                        box ? box.text : foldedText(frame)),
             svgElement("title", {}, box ? `${data.details[id].scope || "(root)"}: ${box.title} ${box.text}` :
               `${data.details[id].title}: ${frame.kind === "repeat" ? "click to unroll" : "click to unfold"}`));
    return g;
  }

  function edgePath(from, to) {
    const x1 = from.x + from.width / 2, y1 = from.y + from.height, x2 = to.x + to.width / 2, y2 = to.y;
    const bend = Math.max(18, Math.abs(y2 - y1) / 2);
    return `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2 - 2}`;
  }

  function drawScene(tree, laid, scene) {
    const frames = svgElement("g", {class: "frames"}), edges = svgElement("g", {class: "edges"});
    const boxes = svgElement("g", {class: "boxes"}), ties = svgElement("g", {class: "ties"});
    const drawn = new Map();
    laid.rects.forEach((r, id) => {
      const g = r.open ? drawFrame(tree.frames.get(id), r) : drawBox(tree, id, r);
      (r.open ? frames : boxes).append(g);
      drawn.set(id, g);
    });
    laid.edges.forEach(({tail, head, shape}) => {
      const path = svgElement("path", {d: edgePath(laid.rects.get(tail), laid.rects.get(head)), "marker-end": "url(#arrow)"});
      path.append(svgElement("title", {}, shape));
      edges.append(path);
    });
    scene.replaceChildren(svgElement("rect", {class: "paper", width: laid.width, height: laid.height}),
                          frames, edges, ties, boxes);
    return {drawn, ties};
  }

  /* ---- the camera: zoom about a point, pan, fit, centre; the overview map follows it ---- */

  function makeCamera(pane, lens, onChange) {
    const view = {x: 0, y: 0, k: 1, width: 1, height: 1};
    const apply = () => {
      lens.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
      onChange(view);
    };
    const size = () => ({width: pane.clientWidth, height: pane.clientHeight});
    return {
      view,
      setContent(width, height) { view.width = width; view.height = height; },
      zoomAt(k, px, py) {
        const to = Math.min(4, Math.max(0.02, k));
        view.x = px - (px - view.x) * to / view.k;
        view.y = py - (py - view.y) * to / view.k;
        view.k = to;
        apply();
      },
      zoomBy(factor) { const s = size(); this.zoomAt(view.k * factor, s.width / 2, s.height / 2); },
      panBy(dx, dy) { view.x += dx; view.y += dy; apply(); },
      fit(least = 0) {        // the whole scene, centred; or its top at scale `least` when fitting is smaller
        const s = size(), fitting = Math.min(1.5, (s.width - 20) / view.width, (s.height - 20) / view.height);
        view.k = Math.max(fitting, least);
        view.x = (s.width - view.width * view.k) / 2;
        view.y = view.k > fitting ? 10 : (s.height - view.height * view.k) / 2;
        apply();
      },
      centreOn(x, y) {
        const s = size();
        view.x = s.width / 2 - x * view.k;
        view.y = s.height / 2 - y * view.k;
        apply();
      },
      size,
    };
  }

  function makeOverview(pane, camera) {
    const map = svgElement("svg", {class: "overview", width: 180, height: 130});
    const copy = svgElement("use", {href: "#scene"});
    const frame = svgElement("rect", {class: "viewport"});
    map.append(copy, frame);
    pane.append(map);
    let content = {width: 1, height: 1};
    const scale = () => Math.min(180 / content.width, 130 / content.height);
    const toScene = event => {
      const box = map.getBoundingClientRect(), k = scale();
      return [(event.clientX - box.left) / k, (event.clientY - box.top) / k];
    };
    let dragging = false;
    map.addEventListener("pointerdown", event => {
      dragging = true;
      event.stopPropagation();
      camera.centreOn(...toScene(event));
    });
    window.addEventListener("pointermove", event => { if (dragging) camera.centreOn(...toScene(event)); });
    window.addEventListener("pointerup", () => { dragging = false; });
    return {
      setContent(width, height) {
        content = {width, height};
        const k = scale();
        map.setAttribute("width", width * k);
        map.setAttribute("height", height * k);
        map.setAttribute("viewBox", `0 0 ${width} ${height}`);
      },
      follow(view) {           // the part of the scene the pane shows
        const s = camera.size();
        Object.entries({x: -view.x / view.k, y: -view.y / view.k, width: s.width / view.k, height: s.height / view.k})
          .forEach(([key, value]) => frame.setAttribute(key, value));
      },
    };
  }

  /* ---- the graph pane ---- */

  function graphView() {
    const pane = document.getElementById("graph-pane");
    const details = document.getElementById("details");
    const tree = buildTree();
    const svg = svgElement("svg", {class: "graph", width: "100%", height: "100%"});
    const defs = svgElement("defs");
    const marker = svgElement("marker", {id: "arrow", viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 6,
                                         markerHeight: 6, orient: "auto"});
    marker.append(svgElement("path", {d: "M0,0 L8,4 L0,8 z"}));
    const lens = svgElement("g", {class: "camera"}), scene = svgElement("g", {id: "scene"});
    defs.append(marker);
    lens.append(scene);
    svg.append(defs, lens);
    pane.append(svg);
    let overview = null;
    const camera = makeCamera(pane, lens, view => overview && overview.follow(view));
    overview = makeOverview(pane, camera);
    let laid = null, drawn = null, selected = null, hits = [], current = -1, dragged = false;

    function redraw(anchor) {
      const before = anchor && laid && laid.rects.get(anchor);
      laid = layOut(tree);
      drawn = drawScene(tree, laid, scene);
      camera.setContent(laid.width, laid.height);
      overview.setContent(laid.width, laid.height);
      const after = anchor && laid.rects.get(anchor);
      if (before && after) camera.panBy((before.x - after.x) * camera.view.k, (before.y - after.y) * camera.view.k);
      else camera.panBy(0, 0);
      mark();
      pane.dataset.boxes = laid.rects.size;
    }

    /* Search hits, the dimmed rest and the selected box (and the boxes tied to it by a gradient). */
    function mark() {
      const shownHits = new Set(hits.map(id => visibleOf(tree, id)));
      drawn.drawn.forEach((g, id) => {
        g.classList.toggle("hit", shownHits.has(id));
        g.classList.toggle("dim", hits.length > 0 && !shownHits.has(id) && !laid.rects.get(id).open);
        g.classList.toggle("selected", selected !== null && visibleOf(tree, selected) === id);
      });
      const tied = selected === null ? [] : data.ties.filter(pair => pair.includes(selected))
        .map(([forward, backward]) => [visibleOf(tree, forward), visibleOf(tree, backward)]);
      drawn.ties.replaceChildren(...tied.map(([a, b]) => svgElement("path", {class: "tie",
        d: edgePath(laid.rects.get(a), laid.rects.get(b))})));
      tied.flat().forEach(id => drawn.drawn.get(id).classList.add("tied"));
    }

    function toggle(id) {
      const frame = tree.frames.get(id);
      frame.folded = !frame.folded;
      redraw(id);
      show(id);
    }

    function show(id) {
      selected = id;
      mark();
      const box = data.details[id];
      const list = element("dl");
      FIELDS.filter(key => box[key] !== undefined && box[key].length).forEach(key => list.append(
        element("dt", {}, key),
        element("dd", {}, ...[].concat(box[key]).map(line => element("div", {}, line)))));
      const tied = data.ties.filter(pair => pair.includes(id)).map(([forward, backward]) => forward === id ? backward : forward);
      if (tied.length) list.append(element("dt", {}, tied.some(other => data.details[other]["gradient of"]) ?
        "its gradient" : "forward op"), element("dd", {}, ...tied.map(other => {
        const link = button(`${data.details[other].title} ${other}`, "show this box", () => reveal(other));
        link.classList.add("link");
        return link;
      })));
      details.replaceChildren(element("h2", {}, box.title, element("span", {class: "id"}, id)), list);
    }

    function reveal(id) {
      tree.pathOf(id).slice(0, -1).forEach(frame => { tree.frames.get(frame).folded = false; });
      redraw();
      const r = laid.rects.get(visibleOf(tree, id));
      camera.centreOn(r.x + r.width / 2, r.y + r.height / 2);
      show(id);
    }

    scene.addEventListener("click", event => {
      const g = event.target.closest("[data-id]");
      if (dragged || !g) return;
      const id = g.dataset.id;
      if (g.classList.contains("module") || event.target.classList.contains("frame-title")) toggle(id);
      else if (!g.classList.contains("frame")) show(id);
    });
    details.append(element("h2", {}, "Details"), element("p", {class: "hint"},
      "Click a box for its op, shape, FLOPs, source line and parameters; a folded module to unfold it, a frame's " +
      "name to fold it. Wheel: zoom; drag or arrows: pan; f: fit; + − 0: zoom."));

    panAndZoom(pane, camera, moved => { dragged = moved; });
    const search = searchBox(tree, found => {
      hits = found;
      current = -1;
      mark();
    }, () => {
      if (!hits.length) return "";
      current = (current + 1) % hits.length;
      reveal(hits[current]);
      return `${current + 1} of ${hits.length}`;
    });
    const foldAll = folded => () => {
      tree.frames.forEach(frame => { frame.folded = folded; });
      redraw();
      camera.fit();
    };
    document.querySelector("header").append(element("div", {class: "toolbar"}, ...search,
      button("−", "zoom out (−)", () => camera.zoomBy(1 / 1.25)),
      button("fit", "fit the whole graph in the pane (f)", () => camera.fit()),
      button("+", "zoom in (+)", () => camera.zoomBy(1.25)),
      button("fold all", "fold every module into one box", foldAll(true)),
      button("unfold all", "show every box", foldAll(false))));
    redraw();
    camera.fit(0.6);
  }

  /* Wheel zooms about the pointer; a drag pans (and a click that moved is no click); keys pan and zoom. */
  function panAndZoom(pane, camera, setDragged) {
    pane.addEventListener("wheel", event => {
      event.preventDefault();
      const box = pane.getBoundingClientRect();
      camera.zoomAt(camera.view.k * Math.exp(-event.deltaY * (event.deltaMode ? 0.05 : 0.0015)),
                    event.clientX - box.left, event.clientY - box.top);
    }, {passive: false});
    let drag = null;
    pane.addEventListener("pointerdown", event => {
      drag = {x: event.clientX, y: event.clientY};
      setDragged(false);
    });
    window.addEventListener("pointermove", event => {
      if (!drag) return;
      const dx = event.clientX - drag.x, dy = event.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) setDragged(true);
      camera.panBy(dx, dy);
      drag = {x: event.clientX, y: event.clientY};
    });
    window.addEventListener("pointerup", () => { drag = null; });
    const keys = {ArrowLeft: () => camera.panBy(80, 0), ArrowRight: () => camera.panBy(-80, 0),
      ArrowUp: () => camera.panBy(0, 80), ArrowDown: () => camera.panBy(0, -80), "+": () => camera.zoomBy(1.25),
      "=": () => camera.zoomBy(1.25), "-": () => camera.zoomBy(1 / 1.25), "−": () => camera.zoomBy(1 / 1.25),
      0: () => camera.zoomBy(1 / camera.view.k), f: () => camera.fit()};
    document.addEventListener("keydown", event => {
      if (event.target.closest?.("input, select, textarea") || event.ctrlKey || event.metaKey || !keys[event.key]) return;
      event.preventDefault();
      keys[event.key]();
    });
  }

  /* The search box: boxes and frames whose id, title, op, name, scope or ops contain the text; Enter goes to
     the next one (`next` returns what to say). */
  function searchBox(tree, onHits, next) {
    const search = element("input", {type: "search", id: "search", placeholder: "find boxes: name, op or scope"});
    const found = element("span", {class: "found"});
    const ids = [...tree.boxes.keys(), ...tree.frames.keys()];
    search.addEventListener("input", () => {
      const text = search.value.trim().toLowerCase();
      const fields = id => [id, ...["title", "op", "name", "scope", "ops"].map(key => data.details[id][key] || "")];
      const hits = text ? ids.filter(id => fields(id).some(field => field.toLowerCase().includes(text))) : [];
      found.textContent = text ? `${hits.length} found` : "";
      onHits(hits);
    });
    search.addEventListener("keydown", event => {
      if (event.key === "Enter") found.textContent = next() || found.textContent;
    });
    return [search, found];
  }

  /* ---- attention ---- */

  const color = h => HEAD_COLORS[h % HEAD_COLORS.length];
  const heat = w => `rgb(${Math.round(255 - 171 * w)},${Math.round(255 - 216 * w)},${Math.round(255 - 112 * w)})`;
  const mean = (map, example, heads, q, k) =>
    heads.reduce((sum, h) => sum + (map.weights[example][h][q][k] || 0), 0) / Math.max(heads.length, 1);

  /* The labels of an image map's keys and queries: CLS, then the cells by (row, column). */
  function imageLabels(map, example) {
    const image = map.image, keys = map.keys[example], queries = map.queries[example];
    const cell = i => i < image.cls ? "CLS" : `cell ${Math.floor((i - image.cls) / image.columns)},${(i - image.cls) % image.columns}`;
    return {keys: keys.map((_, i) => cell(i)), queries: queries.length === keys.length ? queries.map((_, i) => cell(i)) : queries};
  }

  function attentionView() {
    const view = document.getElementById("attention");
    view.append(element("h2", {}, "Attention"));
    if (!data.attention.length) {
      view.append(element("p", {class: "hint"}, data.note || "The graph computes no attention weights " +
        "(nodes named \"attention\")."));
      return;
    }
    const state = {layer: 0, example: 0, heads: new Set([0]), mode: "heads", enlarged: null};
    const layer = element("select", {id: "layer", "aria-label": "attention module"});
    data.attention.forEach((map, i) => layer.append(element("option", {value: i},
      `${map.scope} · ${map.weights[0].length} head${map.weights[0].length > 1 ? "s" : ""} · ` +
      `${map.queries[0].length}×${map.keys[0].length}`)));
    const example = element("select", {id: "example", "aria-label": "example of the batch"});
    const modes = element("div", {class: "modes"});
    const body = element("div", {class: "attention-body"});
    view.append(layer, element("label", {class: "example"}, "example ", example), modes, body);

    function draw() {
      const map = data.attention[state.layer];
      example.replaceChildren(...map.weights.map((_, b) => element("option", {value: b}, `${b + 1} of ${map.weights.length}`)));
      state.example = Math.min(state.example, map.weights.length - 1);
      example.value = state.example;
      modes.replaceChildren(...[["heads", map.image ? "over the picture" : "head view"], ["model", "model view"]]
        .map(([mode, label]) => {
          const made = button(label, mode === "model" ? "every module × head as a small map" : "one module's heads", () => {
            state.mode = mode;
            draw();
          });
          made.classList.toggle("on", state.mode === mode);
          made.dataset.mode = mode;
          return made;
        }));
      if (state.mode === "model") body.replaceChildren(...modelView(state, draw));
      else body.replaceChildren(headToggles(map, state, draw),
        ...(map.image ? pictureView(map, state) : linesView(map, state)));
    }

    layer.addEventListener("change", () => {
      state.layer = Number(layer.value);
      state.heads = new Set(data.attention[state.layer].weights[0].keys());
      draw();
    });
    example.addEventListener("change", () => { state.example = Number(example.value); draw(); });
    state.heads = new Set(data.attention[0].weights[0].keys());
    draw();
  }

  function headToggles(map, state, draw) {
    const toggles = element("div", {class: "heads"});
    map.weights[0].forEach((_, h) => {
      const toggle = element("button", {type: "button", class: `head${state.heads.has(h) ? " on" : ""}`,
        style: `--head: ${color(h)}`, title: `head ${h}: click to show or hide, double-click to show it alone`}, `${h}`);
      toggle.addEventListener("click", () => { state.heads.has(h) ? state.heads.delete(h) : state.heads.add(h); draw(); });
      toggle.addEventListener("dblclick", () => { state.heads = new Set([h]); draw(); });
      toggles.append(toggle);
    });
    return toggles;
  }

  /* bertviz's head view: queries on the left joined to keys on the right by one line per head and pair, as
     opaque as the weight; hovering a token keeps its lines only and says where it attends most. */
  function linesView(map, state) {
    const b = state.example, queries = map.queries[b], keys = map.keys[b], shown = [...state.heads];
    const readout = element("p", {class: "readout"}, "Hover a token to see where it attends.");
    const drawing = svgElement("svg", {class: "lines"});
    const row = 20, top = 34, left = 130, right = 250;
    const height = top + row * Math.max(queries.length, keys.length) + 6;
    drawing.setAttribute("viewBox", `0 0 380 ${height}`);
    drawing.setAttribute("height", height);
    drawing.append(svgElement("text", {x: left, y: 14, "text-anchor": "end", class: "axis"}, "queries"),
                   svgElement("text", {x: right, y: 14, class: "axis"}, "keys"));
    const lines = [];
    shown.forEach(h => map.weights[b][h].forEach((weights, q) => weights.forEach((w, k) => {
      if (w === null || w < 0.01) return;
      const line = svgElement("line", {x1: left + 6, y1: top + row * q - 4, x2: right - 6, y2: top + row * k - 4,
        stroke: color(h), "stroke-opacity": w, "stroke-width": 2});
      lines.push({line, q, k});
      drawing.append(line);
    })));
    const tokens = (labels, side) => labels.map((label, i) => {
      const x = side === "query" ? left : right;
      const group = svgElement("g", {class: "token"});
      const shade = svgElement("rect", {x: side === "query" ? x - 112 : x - 4, y: top + row * i - 16, width: 116,
        height: row - 3, rx: 3, "fill-opacity": 0});
      const text = svgElement("text", {x, y: top + row * i - 4, "text-anchor": side === "query" ? "end" : "start"},
        label.length > 16 ? label.slice(0, 15) + "…" : label);
      group.append(shade, text, svgElement("title", {}, `${side} ${i}: ${label}`));
      group.addEventListener("mouseenter", () => focus(side, i));
      group.addEventListener("mouseleave", () => focus(null));
      drawing.append(group);
      return shade;
    });
    const queryShades = tokens(queries, "query"), keyShades = tokens(keys, "key");

    function focus(side, i) {
      lines.forEach(({line, q, k}) => line.classList.toggle("off", side !== null && (side === "query" ? q : k) !== i));
      [...queryShades, ...keyShades].forEach(shade => shade.setAttribute("fill-opacity", 0));
      if (side === null || !shown.length) {
        readout.textContent = "Hover a token to see where it attends.";
        return;
      }
      const others = side === "query" ? keyShades : queryShades;
      const weights = others.map((_, j) => side === "query" ? mean(map, b, shown, i, j) : mean(map, b, shown, j, i));
      others.forEach((shade, j) => {
        shade.setAttribute("fill", shown.length === 1 ? color(shown[0]) : "#54278f");
        shade.setAttribute("fill-opacity", 0.75 * weights[j]);
      });
      const labels = side === "query" ? keys : queries;
      readout.textContent = `${side} ${side === "query" ? queries[i] : keys[i]} (${i}), ` +
        `${shown.length === 1 ? `head ${shown[0]}` : `mean of ${shown.length} heads`}: ` +
        `${side === "query" ? "attends to" : "attended by"} ${strongest(weights, labels)}`;
    }
    return [drawing, readout];
  }

  const strongest = (weights, labels) => weights.map((w, j) => [w, j]).sort((a, b) => b[0] - a[0]).slice(0, 3)
    .map(([w, j]) => `${labels[j]} ${w.toFixed(2)}`).join(", ");

  /* The picture of one example on a canvas, `size` pixels on its longer side, and the cell rectangles. */
  function pictureCanvas(image, example, size) {
    const k = size / Math.max(image.width, image.height);
    const canvas = element("canvas", {width: Math.round(image.width * k), height: Math.round(image.height * k)});
    const source = document.createElement("canvas");
    source.width = image.width;
    source.height = image.height;
    const pixels = source.getContext("2d").createImageData(image.width, image.height);
    image.pixels[example].forEach((v, i) => { pixels.data[i + Math.floor(i / 3)] = v; });
    for (let i = 3; i < pixels.data.length; i += 4) pixels.data[i] = 255;
    source.getContext("2d").putImageData(pixels, 0, 0);
    const context = canvas.getContext("2d");
    context.imageSmoothingEnabled = false;
    context.drawImage(source, 0, 0, canvas.width, canvas.height);
    const cw = canvas.width / image.columns, ch = canvas.height / image.rows;
    const cell = i => ({x: (i % image.columns) * cw, y: Math.floor(i / image.columns) * ch, width: cw, height: ch});
    return {canvas, context, cell};
  }

  /* The weights over the picture, one small picture per query (a generated word, a patch, CLS): cells dimmed
     by how little the query attends to them, the strongest outlined, CLS's weight written below. */
  function pictureView(map, state) {
    const image = map.image, b = state.example, shown = [...state.heads];
    const labels = imageLabels(map, b);
    const readout = element("p", {class: "readout"}, "Each picture: where one query attends (bright = much).");
    const grid = element("div", {class: "pictures"});
    map.queries[b].forEach((query, q) => {
      const weights = map.keys[b].map((_, k) => mean(map, b, shown, q, k));
      const cells = weights.slice(image.cls), top = Math.max(...cells, 1e-9);
      const {canvas, context, cell} = pictureCanvas(image, b, 96);
      cells.forEach((w, i) => {
        const r = cell(i);
        context.fillStyle = `rgba(0,0,0,${0.6 * (1 - w / top)})`;
        context.fillRect(r.x, r.y, r.width, r.height);
        context.fillStyle = `rgba(255,255,190,${0.5 * w / top})`;
        context.fillRect(r.x, r.y, r.width, r.height);
        if (cells.length <= 16) label(context, r, w.toFixed(2));
      });
      outline(context, cell(cells.indexOf(top)), "#fdae6b");
      if (map.queries[b].length === map.keys[b].length && q >= image.cls) outline(context, cell(q - image.cls), "#3182bd");
      const caption = element("figcaption", {}, `${q}: ${labels.queries[q]}`,
        ...(image.cls ? [element("span", {class: "cls"}, ` CLS ${weights[0].toFixed(2)}`)] : []));
      const figure = element("figure", {title: `${labels.queries[q]} attends to ${strongest(weights, labels.keys)}`},
        canvas, caption);
      figure.addEventListener("mouseenter", () => { readout.textContent = figure.title; });
      grid.append(figure);
    });
    return [grid, readout];
  }

  function label(context, r, text) {
    context.font = "9px sans-serif";
    context.textAlign = "center";
    context.fillStyle = "#000";
    context.fillText(text, r.x + r.width / 2 + 0.5, r.y + r.height / 2 + 3.5);
    context.fillStyle = "#fff";
    context.fillText(text, r.x + r.width / 2, r.y + r.height / 2 + 3);
  }

  function outline(context, r, stroke) {
    context.strokeStyle = stroke;
    context.lineWidth = 2;
    context.strokeRect(r.x + 1, r.y + 1, r.width - 2, r.height - 2);
  }

  /* A map (queries × keys) as a heatmap on a canvas of `size` pixels on its longer side. */
  function heatmap(weights, size) {
    const rows = weights.length, columns = Math.max(...weights.map(row => row.length));
    const k = size / Math.max(rows, columns);
    const canvas = element("canvas", {width: Math.max(1, Math.round(columns * k)), height: Math.max(1, Math.round(rows * k))});
    const context = canvas.getContext("2d");
    weights.forEach((row, q) => row.forEach((w, j) => {
      context.fillStyle = heat(w === null ? 0 : w);
      context.fillRect(j * k, q * k, Math.ceil(k), Math.ceil(k));
    }));
    return canvas;
  }

  /* bertviz's model view: a row per attention module, a small map per head; a click enlarges one with its
     query and key labels. */
  function modelView(state, draw) {
    const b = state.example;
    const table = element("div", {class: "model-view"});
    data.attention.forEach((map, i) => {
      const row = element("div", {class: "model-row"}, element("span", {class: "scope"}, map.scope));
      map.weights[b].forEach((weights, h) => {
        const cell = element("button", {type: "button", class: "map", title: `${map.scope}, head ${h}: click to enlarge`},
          heatmap(weights, 56));
        cell.classList.toggle("on", state.enlarged !== null && state.enlarged[0] === i && state.enlarged[1] === h);
        cell.addEventListener("click", () => { state.enlarged = [i, h]; draw(); });
        row.append(cell);
      });
      table.append(row);
    });
    if (state.enlarged === null || !data.attention[state.enlarged[0]]) return [table];
    const [i, h] = state.enlarged, map = data.attention[i];
    const labels = map.image ? imageLabels(map, b) : {queries: map.queries[b], keys: map.keys[b]};
    return [table, enlarged(map.weights[b][h], labels, `${map.scope}, head ${h}, example ${b + 1}`)];
  }

  function enlarged(weights, labels, caption) {
    const canvas = heatmap(weights, 300);
    const readout = element("p", {class: "readout"}, "Hover the map for a query, a key and its weight.");
    canvas.addEventListener("mousemove", event => {
      const box = canvas.getBoundingClientRect();
      const q = Math.floor((event.clientY - box.top) / box.height * weights.length);
      const k = Math.floor((event.clientX - box.left) / box.width * weights[0].length);
      if (weights[q] && weights[q][k] !== undefined)
        readout.textContent = `query ${labels.queries[q]} → key ${labels.keys[k]}: ${(weights[q][k] ?? NaN).toFixed(3)}`;
    });
    return element("figure", {class: "enlarged"}, element("figcaption", {}, caption), canvas, readout);
  }

  try {
    graphView();
    attentionView();
    document.body.dataset.viewer = "ready";
  } catch (error) {
    document.body.dataset.error = String(error);
    throw error;
  }
})();
