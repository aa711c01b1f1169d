//! A drawing of a machine as SVG, laid out here without Graphviz (the playground draws in the
//! page, as you type): the nodes in layers down the page, each edge from one layer to a later one
//! where it can, the order within a layer chosen to cross fewer edges.
//!
//! The steps: every node gets a layer, the longest path to it from a node nothing leads to (edges
//! that close a cycle, found depth first, count backwards); the nodes of a layer are ordered by the
//! mean position of their neighbours in the layer above, then below, a few times; each layer is
//! centred. An edge is a curve from the bottom of its source to the top of its target; one that
//! goes back up, or stays in its layer, bends out to the right.
//!
//! Each node is a `<g class="node" data-node="NAME">` with `data-start`/`data-end` (where it was
//! written, in UTF-16 code units, from `$sourceRange`) so that a page can select its source, and
//! each edge a `<g class="edge" data-from data-to>`, so that a page can mark an execution's path.

use std::collections::HashMap;
use std::fmt::Write;

use serde_json::Value as Json;

use super::access::{get_array, get_str, node_name};
use super::markdown::escape_html as escape;

/// Width of a character of a label, in the drawing's units (a monospace estimate).
const CHAR: f64 = 7.2;
/// A node's height.
const NODE_HEIGHT: f64 = 40.0;
/// Space between two nodes of a layer.
const GAP: f64 = 28.0;
/// Space between two layers.
const LAYER_GAP: f64 = 70.0;
/// Margin around the drawing.
const MARGIN: f64 = 20.0;
/// Sweeps of the ordering heuristic.
const SWEEPS: usize = 4;

/// A node as drawn.
struct Box {
    name: String,
    label: String,
    kind: String,
    range: Option<(u64, u64)>,
    layer: usize,
    x: f64,
    y: f64,
    width: f64,
}

/// The SVG drawing of `machine` (canonical JSON).
pub fn to_svg(machine: &Json) -> String {
    let mut boxes = boxes(machine);
    let index: HashMap<String, usize> = boxes
        .iter()
        .enumerate()
        .map(|(i, b)| (b.name.clone(), i))
        .collect();
    let edges: Vec<(usize, usize, String)> = get_array(machine, "edges")
        .iter()
        .filter_map(|e| {
            let from = *index.get(get_str(e, "source")?)?;
            let to = *index.get(get_str(e, "target")?)?;
            Some((from, to, edge_label(e)))
        })
        .collect();
    let layers = layer(boxes.len(), &edges);
    for (b, layer) in boxes.iter_mut().zip(&layers) {
        b.layer = *layer;
    }
    let rows = order(&boxes, &edges);
    let (width, height) = place(&mut boxes, &rows);
    draw(machine, &boxes, &edges, width, height)
}

/// The nodes of `machine`, each with its label and where it was written.
fn boxes(machine: &Json) -> Vec<Box> {
    get_array(machine, "nodes")
        .iter()
        .map(|n| {
            let name = node_name(n).to_string();
            let kind = get_str(n, "type").unwrap_or("").to_string();
            let title = get_str(n, "title").filter(|t| !t.is_empty());
            let label = match title {
                Some(t) => format!("{name} — {t}"),
                None => name.clone(),
            };
            let label: String = if label.chars().count() > 40 {
                label.chars().take(39).chain(['…']).collect()
            } else {
                label
            };
            let shown = label.chars().count().max(kind.chars().count()) as f64;
            let range = n.get("$sourceRange").and_then(|r| {
                let start = r.get("start")?.get("offset")?.as_u64()?;
                let end = r.get("end")?.get("offset")?.as_u64()?;
                Some((start, end))
            });
            Box {
                name,
                label,
                kind,
                range,
                layer: 0,
                x: 0.0,
                y: 0.0,
                width: (shown * CHAR + 24.0).max(60.0),
            }
        })
        .collect()
}

/// What an edge's label shows: its condition, or its written label.
fn edge_label(e: &Json) -> String {
    let attrs = e.get("attributes");
    let text = ["when", "if", "unless"]
        .iter()
        .find_map(|k| {
            let v = attrs?.get(*k)?.as_str()?;
            Some(format!("{k}: {v}"))
        })
        .or_else(|| get_str(e, "label").map(str::to_string))
        .unwrap_or_default();
    if text.chars().count() > 30 {
        text.chars().take(29).chain(['…']).collect()
    } else {
        text
    }
}

/// Each node's layer: the longest path to it over the edges that do not close a cycle.
fn layer(count: usize, edges: &[(usize, usize, String)]) -> Vec<usize> {
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (from, to, _) in edges {
        if from != to {
            out[*from].push(*to);
        }
    }
    // Depth-first, iteratively: an edge to a node on the current path closes a cycle.
    let forward = acyclic(&out);
    let mut indegree = vec![0usize; count];
    for targets in &forward {
        for t in targets {
            indegree[*t] += 1;
        }
    }
    let mut layers = vec![0usize; count];
    let mut ready: Vec<usize> = (0..count).filter(|n| indegree[*n] == 0).collect();
    while let Some(n) = ready.pop() {
        for &t in &forward[n] {
            layers[t] = layers[t].max(layers[n] + 1);
            indegree[t] -= 1;
            if indegree[t] == 0 {
                ready.push(t);
            }
        }
    }
    layers
}

/// The edges of `out` without those that close a cycle (depth first from each node in order).
fn acyclic(out: &[Vec<usize>]) -> Vec<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        No,
        OnPath,
        Done,
    }
    let mut seen = vec![Seen::No; out.len()];
    let mut kept: Vec<Vec<usize>> = vec![Vec::new(); out.len()];
    for root in 0..out.len() {
        if seen[root] != Seen::No {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        seen[root] = Seen::OnPath;
        while let Some((node, next)) = stack.last_mut() {
            let node = *node;
            if let Some(&target) = out[node].get(*next) {
                *next += 1;
                match seen[target] {
                    Seen::OnPath => {}
                    Seen::Done => kept[node].push(target),
                    Seen::No => {
                        kept[node].push(target);
                        seen[target] = Seen::OnPath;
                        stack.push((target, 0));
                    }
                }
            } else {
                seen[node] = Seen::Done;
                stack.pop();
            }
        }
    }
    kept
}

/// The nodes of each layer, in the order that crosses fewer edges (barycentres, a few sweeps down
/// and up).
fn order(boxes: &[Box], edges: &[(usize, usize, String)]) -> Vec<Vec<usize>> {
    let depth = boxes.iter().map(|b| b.layer).max().map_or(0, |d| d + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (i, b) in boxes.iter().enumerate() {
        rows[b.layer].push(i);
    }
    let mut up: Vec<Vec<usize>> = vec![Vec::new(); boxes.len()];
    let mut down: Vec<Vec<usize>> = vec![Vec::new(); boxes.len()];
    for (from, to, _) in edges {
        if boxes[*from].layer < boxes[*to].layer {
            down[*from].push(*to);
            up[*to].push(*from);
        }
    }
    let mut position = vec![0.0f64; boxes.len()];
    let number = |rows: &Vec<Vec<usize>>, position: &mut Vec<f64>| {
        for row in rows {
            for (i, n) in row.iter().enumerate() {
                position[*n] = i as f64;
            }
        }
    };
    number(&rows, &mut position);
    for sweep in 0..SWEEPS {
        let downwards = sweep % 2 == 0;
        let layers: Vec<usize> = if downwards {
            (1..depth).collect()
        } else {
            (0..depth.saturating_sub(1)).rev().collect()
        };
        for l in layers {
            let neighbours = if downwards { &up } else { &down };
            let mut keyed: Vec<(f64, usize)> = rows[l]
                .iter()
                .map(|&n| {
                    let around = &neighbours[n];
                    let key = if around.is_empty() {
                        position[n]
                    } else {
                        around.iter().map(|m| position[*m]).sum::<f64>() / around.len() as f64
                    };
                    (key, n)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            rows[l] = keyed.into_iter().map(|(_, n)| n).collect();
            for (i, n) in rows[l].iter().enumerate() {
                position[*n] = i as f64;
            }
        }
    }
    rows
}

/// Positions: each layer a row, centred on the widest; the drawing's width and height.
fn place(boxes: &mut [Box], rows: &[Vec<usize>]) -> (f64, f64) {
    let row_width = |row: &Vec<usize>, boxes: &[Box]| -> f64 {
        row.iter().map(|n| boxes[*n].width).sum::<f64>() + GAP * row.len().saturating_sub(1) as f64
    };
    let widest = rows
        .iter()
        .map(|r| row_width(r, boxes))
        .fold(0.0f64, f64::max);
    for (l, row) in rows.iter().enumerate() {
        let mut x = MARGIN + (widest - row_width(row, boxes)) / 2.0;
        for &n in row {
            boxes[n].x = x;
            boxes[n].y = MARGIN + l as f64 * (NODE_HEIGHT + LAYER_GAP);
            x += boxes[n].width + GAP;
        }
    }
    let height = MARGIN * 2.0 + rows.len() as f64 * (NODE_HEIGHT + LAYER_GAP) - LAYER_GAP;
    // Room on the right for edges that bend back.
    (widest + MARGIN * 2.0 + 60.0, height.max(MARGIN * 2.0))
}

/// The SVG text.
fn draw(
    machine: &Json,
    boxes: &[Box],
    edges: &[(usize, usize, String)],
    width: f64,
    height: f64,
) -> String {
    let mut s = String::new();
    let title = get_str(machine, "title").unwrap_or("");
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"machine\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"{width:.0}\" height=\"{height:.0}\">\
         <title>{}</title>\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0L10,5L0,10z\"/></marker></defs>",
        escape(title)
    );
    for (from, to, label) in edges {
        edge(&mut s, &boxes[*from], &boxes[*to], label);
    }
    for b in boxes {
        node(&mut s, b);
    }
    s.push_str("</svg>");
    s
}

fn node(s: &mut String, b: &Box) {
    let range = b
        .range
        .map(|(start, end)| format!(" data-start=\"{start}\" data-end=\"{end}\""))
        .unwrap_or_default();
    let (class, kind_text) = if b.kind.is_empty() {
        ("node".to_string(), String::new())
    } else {
        let kind = escape(&b.kind);
        (
            format!("node {kind}"),
            format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"kind\">{kind}</text>",
                b.x + b.width / 2.0,
                b.y + 14.0
            ),
        )
    };
    let label_y = if b.kind.is_empty() {
        b.y + 25.0
    } else {
        b.y + 31.0
    };
    let _ = write!(
        s,
        "<g class=\"{class}\" data-node=\"{name}\"{range}><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" rx=\"6\"/>\
         {kind_text}<text x=\"{cx:.1}\" y=\"{ly:.1}\">{label}</text></g>",
        name = escape(&b.name),
        x = b.x,
        y = b.y,
        w = b.width,
        h = NODE_HEIGHT,
        cx = b.x + b.width / 2.0,
        ly = label_y,
        label = escape(&b.label),
    );
}

fn edge(s: &mut String, from: &Box, to: &Box, label: &str) {
    let (fx, fy) = (from.x + from.width / 2.0, from.y + NODE_HEIGHT);
    let (tx, ty) = (to.x + to.width / 2.0, to.y);
    let path = if to.layer > from.layer {
        let mid = (fy + ty) / 2.0;
        format!("M{fx:.1},{fy:.1} C{fx:.1},{mid:.1} {tx:.1},{mid:.1} {tx:.1},{ty:.1}")
    } else {
        // Back up, or within a layer: out of the source's right side, round, into the target's.
        let (sx, sy) = (from.x + from.width, from.y + NODE_HEIGHT / 2.0);
        let (ex, ey) = (to.x + to.width, to.y + NODE_HEIGHT / 2.0);
        let bend = sx.max(ex) + 40.0;
        format!("M{sx:.1},{sy:.1} C{bend:.1},{sy:.1} {bend:.1},{ey:.1} {ex:.1},{ey:.1}")
    };
    let (lx, ly) = if to.layer > from.layer {
        ((fx + tx) / 2.0 + 4.0, (fy + ty) / 2.0)
    } else {
        (
            from.x.max(to.x) + from.width.max(to.width) + 44.0,
            (fy + ty) / 2.0,
        )
    };
    let text = if label.is_empty() {
        String::new()
    } else {
        format!(
            "<text x=\"{lx:.1}\" y=\"{ly:.1}\" class=\"label\">{}</text>",
            escape(label)
        )
    };
    let _ = write!(
        s,
        "<g class=\"edge\" data-from=\"{}\" data-to=\"{}\"><path d=\"{path}\" marker-end=\"url(#arrow)\"/>{text}</g>",
        escape(&from.name),
        escape(&to.name)
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn svg(source: &str) -> String {
        let compiled = crate::compile(dygram_syntax::source::SourceFile::new("m.dy", source));
        to_svg(&compiled.json(crate::json::JsonOptions {
            source_ranges: true,
        }))
    }

    /// The `y` of node `name`'s box.
    fn top(svg: &str, name: &str) -> f64 {
        let at = svg.find(&format!("data-node=\"{name}\"")).unwrap();
        let y = &svg[at..][svg[at..].find(" y=\"").unwrap() + 4..];
        y[..y.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn a_chain_goes_down_the_page_and_a_loop_bends_back() {
        let s = svg(
            "state start;\nTask review;\nstate done;\nstart -> review -> done;\nreview -> start;\n",
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"), "{s}");
        assert!(top(&s, "start") < top(&s, "review"));
        assert!(top(&s, "review") < top(&s, "done"));
        assert_eq!(s.matches("class=\"edge\"").count(), 3, "{s}");
        // Each node says where it was written, and what it is.
        assert!(
            s.contains("class=\"node task\" data-node=\"review\" data-start="),
            "{s}"
        );
    }

    #[test]
    fn labels_and_names_are_escaped_and_conditions_shown() {
        let s = svg("Task a \"<b> & 'c'\";\na -when: 'n > 1'-> b;\n");
        assert!(s.contains("a — &lt;b&gt; &amp; 'c'"), "{s}");
        assert!(s.contains("when: n &gt; 1"), "{s}");
        assert!(!s.contains("<b>"), "{s}");
    }

    #[test]
    fn a_thousand_nodes_are_laid_out() {
        let mut source = String::new();
        for i in 0..1000 {
            source.push_str(&format!("s{i} -> s{};\n", (i * 7 + 1) % 1000));
        }
        let s = svg(&source);
        assert_eq!(s.matches("class=\"node").count(), 1000);
    }

    #[test]
    fn an_empty_machine_is_an_empty_drawing() {
        let s = svg("");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"), "{s}");
    }
}
