/* attngraph's viewer (attngraph/render/html.py writes the page): the graph that graphviz drew, with zoom, pan,
   module frames that fold into one box, a search and the details of a clicked box; and the attention weights
   of a run, drawn as bertviz's head view. Everything it shows comes from the SVG and from the JSON in
   #attngraph-data: {boxes: {id: details}, attention: [{scope, queries, keys, weights[head][query][key]}], note}. */
(function () {
  "use strict";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const HEAD_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                       "#bcbd22", "#17becf", "#393b79", "#ad494a"];
  const FIELDS = ["kind", "op", "name", "shape", "dtype", "FLOPs", "scope", "source", "ops", "parameters", "inputs",
                  "attributes", "gradient of"];
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
    made.textContent = text;
    return made;
  }

  const titleOf = g => g.querySelector("title").textContent;
  const contains = (outer, inner) => inner.x >= outer.x - 1 && inner.y >= outer.y - 1 &&
    inner.x + inner.width <= outer.x + outer.width + 1 && inner.y + inner.height <= outer.y + outer.height + 1;

  /* The graph pane. Graphviz writes boxes, edges and module frames as sibling <g>s named by their <title>: a box
     by its id (n17, m17), an edge by "tail->head". A frame holds the boxes drawn inside it. */
  function graphView() {
    const pane = document.getElementById("graph-pane");
    const svg = pane.querySelector("svg");
    const details = document.getElementById("details");
    const boxes = new Map([...svg.querySelectorAll("g.node")].filter(g => titleOf(g) in data.boxes)
      .map(g => [titleOf(g), g]));
    let hits = [], current = -1, scale = 1, drag = null, dragged = false;
    const edges = [...svg.querySelectorAll("g.edge")].map(g => ({g, ends: titleOf(g).split("->")}));
    const frames = [...svg.querySelectorAll("g.cluster")].map(g => ({g, area: g.getBBox(), collapsed: false}))
      .sort((a, b) => b.area.width * b.area.height - a.area.width * a.area.height);    // outermost first
    frames.forEach(frame => {
      frame.boxes = [...boxes].filter(([, g]) => contains(frame.area, g.getBBox())).map(([id]) => id);
      frame.inner = frames.filter(other => other !== frame && contains(frame.area, other.area));
      const note = svgElement("text", {class: "frame-note", "text-anchor": "middle",
        x: frame.area.x + frame.area.width / 2, y: frame.area.y + frame.area.height / 2 + 4},
        `${frame.boxes.length} boxes folded · click to unfold`);
      frame.g.append(note);
      frame.g.addEventListener("click", () => { if (!dragged) { frame.collapsed = !frame.collapsed; refresh(); } });
    });

    function refresh() {
      const folder = new Map();     // box id -> the outermost folded frame holding it
      const hidden = new Set();
      frames.filter(frame => frame.collapsed && !hidden.has(frame)).forEach(frame => {
        frame.inner.forEach(inner => hidden.add(inner));
        frame.boxes.forEach(id => folder.has(id) || folder.set(id, frame));
      });
      frames.forEach(frame => {
        frame.g.classList.toggle("hidden", hidden.has(frame));
        frame.g.classList.toggle("collapsed", frame.collapsed);
        frame.g.classList.toggle("has-hit", frame.boxes.some(id => hits.includes(id)));
      });
      boxes.forEach((g, id) => g.classList.toggle("hidden", folder.has(id)));
      edges.forEach(({g, ends: [tail, head]}) =>
        g.classList.toggle("hidden", folder.has(tail) && folder.get(tail) === folder.get(head)));
    }

    function select(id) {
      boxes.forEach((g, other) => g.classList.toggle("selected", other === id));
      const box = data.boxes[id];
      const list = element("dl");
      FIELDS.filter(key => box[key] !== undefined && box[key].length).forEach(key => list.append(
        element("dt", {}, key),
        element("dd", {}, ...[].concat(box[key]).map(line => element("div", {}, line)))));
      details.replaceChildren(element("h2", {}, box.title, element("span", {class: "id"}, id)), list);
    }

    function reveal(id) {
      frames.forEach(frame => { if (frame.boxes.includes(id)) frame.collapsed = false; });
      refresh();
      select(id);
      boxes.get(id).scrollIntoView({block: "center", inline: "center"});
    }

    boxes.forEach((g, id) => g.addEventListener("click", () => { if (!dragged) select(id); }));
    details.append(element("h2", {}, "Details"), element("p", {class: "hint"},
      "Click a box for its op, shape, FLOPs, source line and parameters. Click a module's name to fold it into " +
      "one box; drag to pan, Ctrl + wheel to zoom."));

    // Search: boxes whose id, title, op, name or scope (or a folded module's ops) contain the text; Enter goes to
    // the next one.
    const search = element("input", {type: "search", id: "search", placeholder: "find boxes: name, op or scope"});
    const found = element("span", {class: "found"});
    search.addEventListener("input", () => {
      const text = search.value.trim().toLowerCase();
      const box = id => data.boxes[id];
      hits = text ? [...boxes.keys()].filter(id => [id, box(id).title, box(id).op, box(id).name, box(id).scope,
        box(id).ops || ""].some(field => field.toLowerCase().includes(text))) : [];
      boxes.forEach((g, id) => {
        g.classList.toggle("hit", hits.includes(id));
        g.classList.toggle("dim", text !== "" && !hits.includes(id));
      });
      current = -1;
      found.textContent = text ? `${hits.length} found` : "";
      refresh();
    });
    search.addEventListener("keydown", event => {
      if (event.key !== "Enter" || !hits.length) return;
      current = (current + 1) % hits.length;
      reveal(hits[current]);
      found.textContent = `${current + 1} of ${hits.length}`;
    });

    // Zoom (the drawing's own size is 1) and pan by dragging.
    const natural = {width: svg.width.baseVal.value, height: svg.height.baseVal.value};
    const zoom = to => {
      scale = Math.min(4, Math.max(0.05, to));
      svg.style.width = `${natural.width * scale}px`;
      svg.style.height = `${natural.height * scale}px`;
    };
    const fit = () => zoom(Math.min(1, (pane.clientWidth - 24) / natural.width));
    pane.addEventListener("wheel", event => {
      if (!event.ctrlKey) return;
      event.preventDefault();
      zoom(scale * (event.deltaY < 0 ? 1.15 : 1 / 1.15));
    }, {passive: false});
    pane.addEventListener("mousedown", event => {
      drag = {x: event.clientX, y: event.clientY, left: pane.scrollLeft, top: pane.scrollTop};
      dragged = false;
    });
    window.addEventListener("mousemove", event => {
      if (!drag) return;
      dragged = dragged || Math.abs(event.clientX - drag.x) + Math.abs(event.clientY - drag.y) > 4;
      pane.scrollLeft = drag.left - (event.clientX - drag.x);
      pane.scrollTop = drag.top - (event.clientY - drag.y);
    });
    window.addEventListener("mouseup", () => { drag = null; });

    const button = (label, title, action) => {
      const made = element("button", {type: "button", title}, label);
      made.addEventListener("click", action);
      return made;
    };
    const foldAll = collapsed => () => { frames.forEach(frame => { frame.collapsed = collapsed; }); refresh(); };
    document.querySelector("header").append(element("div", {class: "toolbar"}, search, found,
      button("−", "zoom out", () => zoom(scale / 1.25)), button("fit", "fit the width", fit),
      button("+", "zoom in", () => zoom(scale * 1.25)),
      button("fold all", "fold every module into one box", foldAll(true)),
      button("unfold all", "show every box", foldAll(false))));
    fit();
  }

  /* The attention view: a module selector, one toggle per head, queries on the left joined to keys on the right
     by one line per head and pair, as opaque as the weight; hovering a token keeps its lines only. */
  function attentionView() {
    const view = document.getElementById("attention");
    view.append(element("h2", {}, "Attention"));
    if (!data.attention.length) {
      view.append(element("p", {class: "hint"}, data.note || "The graph computes no attention weights " +
        "(nodes named \"attention\")."));
      return;
    }
    const layer = element("select", {id: "layer", "aria-label": "attention module"});
    data.attention.forEach((map, i) => layer.append(element("option", {value: i},
      `${map.scope} · ${map.weights.length} head${map.weights.length > 1 ? "s" : ""} · ` +
      `${map.queries.length}×${map.keys.length}`)));
    const toggles = element("div", {class: "heads"});
    const readout = element("p", {class: "readout"}, "Hover a token to see where it attends.");
    const drawing = svgElement("svg", {class: "lines"});
    view.append(layer, toggles, drawing, readout);
    let shown = new Set();

    function draw() {
      const map = data.attention[layer.value];
      const heads = map.weights.length;
      if (toggles.children.length !== heads) {
        shown = new Set(map.weights.keys());
        toggles.replaceChildren(...map.weights.map((_, h) => {
          const toggle = element("button", {type: "button", class: "head on", style: `--head: ${color(h)}`,
            title: `head ${h}: click to show or hide, double-click to show it alone`}, `${h}`);
          toggle.addEventListener("click", () => { shown.has(h) ? shown.delete(h) : shown.add(h); draw(); });
          toggle.addEventListener("dblclick", () => { shown = new Set([h]); draw(); });
          return toggle;
        }));
      }
      [...toggles.children].forEach((toggle, h) => toggle.classList.toggle("on", shown.has(h)));
      const row = 20, top = 34, left = 130, right = 250;
      const height = top + row * Math.max(map.queries.length, map.keys.length) + 6;
      drawing.setAttribute("viewBox", `0 0 380 ${height}`);
      drawing.setAttribute("height", height);
      drawing.replaceChildren(
        svgElement("text", {x: left, y: 14, "text-anchor": "end", class: "axis"}, "queries"),
        svgElement("text", {x: right, y: 14, class: "axis"}, "keys"));
      const lines = [];
      shown.forEach(h => map.weights[h].forEach((weights, q) => weights.forEach((w, k) => {
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
      const queries = tokens(map.queries, "query"), keys = tokens(map.keys, "key");

      function focus(side, i) {
        lines.forEach(({line, q, k}) => line.classList.toggle("off", side !== null && (side === "query" ? q : k) !== i));
        [...queries, ...keys].forEach(shade => shade.setAttribute("fill-opacity", 0));
        if (side === null || !shown.size) {
          readout.textContent = "Hover a token to see where it attends.";
          return;
        }
        const heads = [...shown];
        const mean = (q, k) => heads.reduce((sum, h) => sum + (map.weights[h][q][k] || 0), 0) / heads.length;
        const others = side === "query" ? keys : queries;
        const weights = others.map((_, j) => side === "query" ? mean(i, j) : mean(j, i));
        others.forEach((shade, j) => {
          shade.setAttribute("fill", heads.length === 1 ? color(heads[0]) : "#54278f");
          shade.setAttribute("fill-opacity", 0.75 * weights[j]);
        });
        const labels = side === "query" ? map.keys : map.queries;
        const top3 = weights.map((w, j) => [w, j]).sort((a, b) => b[0] - a[0]).slice(0, 3)
          .map(([w, j]) => `${labels[j]} ${w.toFixed(2)}`).join(", ");
        const own = side === "query" ? map.queries[i] : map.keys[i];
        readout.textContent = `${side} ${own} (${i}), ${heads.length === 1 ? `head ${heads[0]}` :
          `mean of ${heads.length} heads`}: ${side === "query" ? "attends to" : "attended by"} ${top3}`;
      }
    }

    const color = h => HEAD_COLORS[h % HEAD_COLORS.length];
    layer.addEventListener("change", draw);
    draw();
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
