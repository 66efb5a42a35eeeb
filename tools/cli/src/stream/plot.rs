//! An SVG plot of the stream benchmark: message size on a log₂ x axis, bandwidth (median over
//! rounds) on y, one colour per provider, one dash pattern per window, and the raw link's
//! one-way payload rate as a grey line — drawn by hand, as a handful of lines needs no plotting
//! library. Tagged messages only: RMA cases (`--ops write,read`) are in the table and the CSV.

use std::fmt::Write;

use super::table::{Results, finite};
use super::{Case, Op, fmt_bytes};
use crate::stats::median;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
/// Plot area inside the margins (left, top, right, bottom).
const LEFT: f64 = 70.0;
const TOP: f64 = 40.0;
const RIGHT: f64 = 220.0;
const BOTTOM: f64 = 50.0;
const COLOURS: [&str; 5] = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"];
const DASHES: [&str; 4] = ["", "6,4", "2,3", "10,3,2,3"];

/// One drawn line: its legend, colour, dash pattern and (size, MB/s) points.
struct Line {
    label: String,
    colour: &'static str,
    dash: &'static str,
    points: Vec<(usize, f64)>,
}

/// The SVG text of `r`'s bandwidth figures.
pub fn bandwidth(r: &Results) -> String {
    let sizes: Vec<usize> = {
        let mut s: Vec<usize> = r
            .cases
            .iter()
            .filter(|&&c| c.op == Op::Tagged && c != Case::RATE)
            .map(|c| c.bytes)
            .collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    let windows: Vec<u32> = {
        let mut w: Vec<u32> = r
            .cases
            .iter()
            .filter(|&&c| c.op == Op::Tagged && c != Case::RATE)
            .map(|c| c.window)
            .collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    let link = median(&finite(&r.link_payload_mb_per_s()));
    let mut lines: Vec<Line> = Vec::new();
    for (pi, p) in r.providers.iter().enumerate() {
        for (wi, &window) in windows.iter().enumerate() {
            let points = sizes
                .iter()
                .filter_map(|&bytes| {
                    let m = median(&finite(&r.mb_per_s(p, Case::tagged(bytes, window))))?;
                    Some((bytes, m))
                })
                .collect();
            lines.push(Line {
                label: format!("{p}, window {window}"),
                colour: COLOURS[pi % COLOURS.len()],
                dash: DASHES[wi % DASHES.len()],
                points,
            });
        }
    }
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(link)
        .fold(1.0_f64, f64::max)
        * 1.1;
    let (Some(&first), Some(&last)) = (sizes.first(), sizes.last()) else {
        return empty(r.mtu);
    };
    let x_span = ((last as f64).log2() - (first as f64).log2()).max(1.0);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |bytes: usize| LEFT + ((bytes as f64).log2() - (first as f64).log2()) / x_span * plot_w;
    let y = |mbs: f64| TOP + plot_h - mbs / y_max * plot_h;

    let mut svg = header(r.mtu);
    // Axes, ticks and grid.
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
    );
    for &bytes in &sizes {
        let xb = x(bytes);
        let _ = writeln!(
            svg,
            r##"<text x="{xb:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h + 18.0,
            fmt_bytes(bytes)
        );
    }
    for i in 0..=5 {
        let v = y_max * f64::from(i) / 5.0;
        let yv = y(v);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{yv:.1}" x2="{:.1}" y2="{yv:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v:.0}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            yv + 4.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">message size</text><text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">MB/s</text>"##,
        LEFT + plot_w / 2.0,
        HEIGHT - 12.0,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    // The raw link's payload rate.
    let mut legend = Vec::new();
    if let Some(l) = link {
        let yl = y(l);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{yl:.1}" x2="{:.1}" y2="{yl:.1}" stroke="#888" stroke-width="2"/>"##,
            LEFT + plot_w
        );
        legend.push(("raw link payload rate".to_owned(), "#888", ""));
    }
    for Line {
        label,
        colour,
        dash,
        points,
    } in &lines
    {
        let path: Vec<String> = points
            .iter()
            .map(|&(b, m)| format!("{:.1},{:.1}", x(b), y(m)))
            .collect();
        let _ = writeln!(
            svg,
            r##"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>"##,
            path.join(" ")
        );
        legend.push((label.clone(), *colour, *dash));
    }
    for (i, (label, colour, dash)) in legend.iter().enumerate() {
        let ly = TOP + 10.0 + 20.0 * i as f64;
        let lx = WIDTH - RIGHT + 15.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{:.1}" y="{:.1}">{}</text>"##,
            lx + 28.0,
            lx + 34.0,
            ly + 4.0,
            escape(label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn header(mtu: u32) -> String {
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="24" font-size="14">Streaming bandwidth between two test hosts, MTU {mtu} (median of rounds)</text>
"##
    )
}

fn empty(mtu: u32) -> String {
    let mut svg = header(mtu);
    svg.push_str("<text x=\"70\" y=\"80\">no figures</text></svg>\n");
    svg
}

/// Provider names such as `udp;ofi_rxd` are text, not markup.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::Sample;

    #[test]
    fn draws_one_line_per_provider_and_window_and_the_link() {
        let cases = [
            Case::tagged(4096, 1),
            Case::tagged(1 << 20, 1),
            Case {
                op: Op::Write,
                ..Case::tagged(1 << 20, 1)
            },
            Case::RATE,
        ];
        let mut r = Results::new(1500, &["xdp".into(), "a<b".into()], &cases);
        for p in ["xdp", "a<b"] {
            for c in cases {
                let s = Sample {
                    mb_per_s: 100.0,
                    msgs_per_s: 1.0,
                };
                r.record(p, c, 1, s);
            }
        }
        r.link_pps.push(1e5);
        let svg = bandwidth(&r);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a&lt;b, window 1"));
        assert!(svg.contains("raw link payload rate"));
    }
}
