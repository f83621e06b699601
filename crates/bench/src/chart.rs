//! SVG line charts for the benchmark report: throughput and latency against threads,
//! both axes logarithmic.
//!
//! Drawn by hand rather than with a plotting crate so that the output is byte-for-byte
//! deterministic (reports can be diffed) and self-contained: no fonts, scripts or
//! stylesheets, so the same string works as a standalone `.svg` file and inlined in the
//! HTML report.

use std::fmt::Write as _;

/// One line of a chart: a scenario's values against threads.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// (x = threads, y = value). A missing measurement is simply absent. Points that
    /// cannot sit on a log axis (zero, negative, NaN, infinite) are skipped.
    pub points: Vec<(f64, f64)>,
}

/// A line chart with logarithmic axes: x in powers of two, y in powers of ten.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

impl Chart {
    /// The chart as a single `<svg>` element, 720 x 420 user units.
    ///
    /// There is no XML declaration: it is optional in a standalone `.svg` file and would
    /// be wrong inline in HTML, so the same string serves both. Inline, CSS such as
    /// `max-width: 100%; height: auto` scales it (the viewBox keeps the proportions).
    pub fn svg(&self) -> String {
        let plotted: Vec<Vec<(f64, f64)>> = self
            .series
            .iter()
            .map(|s| plottable_points(&s.points))
            .collect();
        let mut out = String::new();
        open_svg(&mut out, &self.title);
        match Frame::fit(&plotted) {
            Some(frame) => {
                frame.draw_grid(&mut out);
                draw_axis_titles(&mut out, &self.x_label, &self.y_label);
                for (index, (series, points)) in self.series.iter().zip(&plotted).enumerate() {
                    frame.draw_series(&mut out, index, series, points, self);
                }
                draw_legend(&mut out, &self.series);
            }
            None => draw_no_data(&mut out),
        }
        out.push_str("</svg>\n");
        out
    }
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 420.0;
// The right margin holds the legend, the left one the y tick labels.
const PLOT_LEFT: f64 = 72.0;
const PLOT_RIGHT: f64 = 560.0;
const PLOT_TOP: f64 = 48.0;
const PLOT_BOTTOM: f64 = 356.0;
const LEGEND_X: f64 = 576.0;
const LEGEND_ROW: f64 = 20.0;
// What fits in the right margin at 12px; longer names are cut with an ellipsis.
const LEGEND_NAME_CHARS: usize = 16;
// Thread labels closer than this would overlap ("1024" next to "2048" is fine).
const MIN_X_LABEL_GAP: f64 = 30.0;
const MARKER_RADIUS: f64 = 3.5;
// Tolerance in log units, so that a value such as 1000 counts as exactly on a tick.
const EPS: f64 = 1e-9;

/// Okabe-Ito, ordered so that the first lines are the most distinct; yellow comes last
/// because it is hard to see on white.
const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

fn color(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

fn is_plottable(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

/// The points that can be drawn on log axes, in x order (a stable sort, so duplicates of
/// one x keep their input order).
fn plottable_points(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut kept: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(x, y)| is_plottable(x) && is_plottable(y))
        .collect();
    kept.sort_by(|a, b| a.0.total_cmp(&b.0));
    kept
}

/// A gridline position in log units (log2 for x, log10 for y) and its label.
#[derive(Debug, Clone, PartialEq)]
struct Tick {
    at: f64,
    label: String,
    /// Drawn a little darker: the powers of ten on the y axis.
    major: bool,
}

/// An axis range in log units; `hi > lo` always holds once built.
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    lo: f64,
    hi: f64,
    ticks: Vec<Tick>,
}

impl Axis {
    /// Where `at` (in log units) falls between the ends: 0 at `lo`, 1 at `hi`.
    fn fraction(&self, at: f64) -> f64 {
        let span = self.hi - self.lo;
        if span > 0.0 {
            (at - self.lo) / span
        } else {
            0.5
        }
    }

    /// Threads: one tick per distinct x, the data range exactly (no padding) so that the
    /// smallest and largest thread counts sit on the plot edges.
    fn threads(xs: &[f64]) -> Option<Axis> {
        let lo = xs.first()?.log2();
        let hi = xs.last()?.log2();
        // A single thread count: centre it, one octave either side.
        let (lo, hi) = if hi - lo < EPS {
            (lo - 1.0, hi + 1.0)
        } else {
            (lo, hi)
        };
        let ticks = xs
            .iter()
            .map(|&x| Tick {
                at: x.log2(),
                label: format_x(x),
                major: true,
            })
            .collect();
        Some(Axis { lo, hi, ticks })
    }

    /// Values: padded out to the enclosing 1-2-5 values so that both ends are labelled.
    fn values(min: f64, max: f64) -> Axis {
        let (lo, hi) = (min.log10(), max.log10());
        let steps = NiceSteps::for_span(hi - lo);
        let candidates = steps.candidates(lo, hi);
        let below = candidates.iter().rposition(|c| c.log() <= lo + EPS);
        let above = candidates.iter().position(|c| c.log() >= hi - EPS);
        let (first, last) = match (below, above) {
            // One value (or all equal, on a nice value): give it a step either side.
            (Some(b), Some(a)) if a <= b => (b.saturating_sub(1), b + 1),
            (Some(b), Some(a)) => (b, a),
            _ => (0, candidates.len().saturating_sub(1)),
        };
        let chosen = candidates.get(first..=last).unwrap_or(&[]);
        match (chosen.first(), chosen.last()) {
            (Some(f), Some(l)) if l.log() > f.log() => Axis {
                lo: f.log(),
                hi: l.log(),
                ticks: chosen.iter().map(Nice::tick).collect(),
            },
            // Not reachable with finite input; a plain range keeps the points drawable.
            _ => Axis {
                lo: lo - 1.0,
                hi: hi + 1.0,
                ticks: Vec::new(),
            },
        }
    }
}

/// A "nice" value `mantissa x 10^exponent`, kept apart so that labels and positions
/// never overflow, whatever the magnitude.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Nice {
    mantissa: u8,
    exponent: i32,
}

impl Nice {
    fn log(self) -> f64 {
        f64::from(self.exponent) + f64::from(self.mantissa).log10()
    }

    fn tick(&self) -> Tick {
        Tick {
            at: self.log(),
            label: format_nice(self.mantissa, self.exponent),
            major: self.mantissa == 1,
        }
    }
}

/// Which nice values the y axis uses: 1-2-5 in every decade for ordinary ranges, and
/// fewer gridlines as the range widens so that labels never pile up.
struct NiceSteps {
    mantissas: &'static [u8],
    /// Decades between ticks.
    stride: i32,
}

impl NiceSteps {
    fn for_span(decades: f64) -> NiceSteps {
        if decades <= 5.0 {
            NiceSteps {
                mantissas: &[1, 2, 5],
                stride: 1,
            }
        } else if decades <= 12.0 {
            NiceSteps {
                mantissas: &[1],
                stride: 1,
            }
        } else {
            NiceSteps {
                mantissas: &[1],
                stride: (decades / 10.0).ceil() as i32,
            }
        }
    }

    /// The nice values from a little below `lo` to a little above `hi` (log10), in
    /// order; the margin guarantees a neighbour either side of the data.
    fn candidates(&self, lo: f64, hi: f64) -> Vec<Nice> {
        let stride = self.stride.max(1);
        let from = (lo.floor() as i32).saturating_sub(2 * stride);
        let to = (hi.ceil() as i32).saturating_add(2 * stride);
        (from..=to)
            .filter(|e| e.rem_euclid(stride) == 0)
            .flat_map(|exponent| {
                self.mantissas
                    .iter()
                    .map(move |&mantissa| Nice { mantissa, exponent })
            })
            .collect()
    }
}

/// The mapping from data to the plot area.
struct Frame {
    x: Axis,
    y: Axis,
}

impl Frame {
    /// `None` when there is nothing to plot.
    fn fit(series: &[Vec<(f64, f64)>]) -> Option<Frame> {
        let mut xs: Vec<f64> = series.iter().flatten().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let ys = series.iter().flatten().map(|p| p.1);
        let min = ys.clone().fold(f64::INFINITY, f64::min);
        let max = ys.fold(f64::NEG_INFINITY, f64::max);
        if !(is_plottable(min) && is_plottable(max)) {
            return None;
        }
        Some(Frame {
            x: Axis::threads(&xs)?,
            y: Axis::values(min, max),
        })
    }

    fn px(&self, x: f64) -> f64 {
        PLOT_LEFT + self.x.fraction(x.log2()) * (PLOT_RIGHT - PLOT_LEFT)
    }

    fn py(&self, y: f64) -> f64 {
        PLOT_BOTTOM - self.y.fraction(y.log10()) * (PLOT_BOTTOM - PLOT_TOP)
    }

    fn tick_px(&self, tick: &Tick) -> f64 {
        PLOT_LEFT + self.x.fraction(tick.at) * (PLOT_RIGHT - PLOT_LEFT)
    }

    fn tick_py(&self, tick: &Tick) -> f64 {
        PLOT_BOTTOM - self.y.fraction(tick.at) * (PLOT_BOTTOM - PLOT_TOP)
    }

    fn draw_grid(&self, out: &mut String) {
        out.push_str("<g class=\"y-axis\" font-size=\"11\" fill=\"#333333\">\n");
        for tick in &self.y.ticks {
            let y = num(self.tick_py(tick));
            let stroke = if tick.major { "#d0d0d0" } else { "#ececec" };
            let _ = writeln!(
                out,
                "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{stroke}\"/>",
                num(PLOT_LEFT),
                num(PLOT_RIGHT),
            );
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                num(PLOT_LEFT - 6.0),
                num(self.tick_py(tick) + 4.0),
                escape(&tick.label),
            );
        }
        out.push_str("</g>\n");

        out.push_str("<g class=\"x-axis\" font-size=\"11\" fill=\"#333333\">\n");
        let mut last_label: Option<f64> = None;
        for tick in &self.x.ticks {
            let x = self.tick_px(tick);
            if last_label.is_some_and(|last| x - last < MIN_X_LABEL_GAP) {
                continue;
            }
            last_label = Some(x);
            let _ = writeln!(
                out,
                "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"#ececec\"/>",
                num(PLOT_TOP),
                num(PLOT_BOTTOM + 4.0),
                x = num(x),
            );
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                num(x),
                num(PLOT_BOTTOM + 18.0),
                escape(&tick.label),
            );
        }
        out.push_str("</g>\n");

        // The axes themselves, drawn over the gridlines.
        let _ = writeln!(
            out,
            "<path d=\"M{l} {t}V{b}H{r}\" fill=\"none\" stroke=\"#333333\"/>",
            l = num(PLOT_LEFT),
            t = num(PLOT_TOP),
            b = num(PLOT_BOTTOM),
            r = num(PLOT_RIGHT),
        );
    }

    fn draw_series(
        &self,
        out: &mut String,
        index: usize,
        series: &Series,
        points: &[(f64, f64)],
        chart: &Chart,
    ) {
        let color = color(index);
        let _ = writeln!(
            out,
            "<g class=\"series\" fill=\"{color}\" stroke=\"{color}\">"
        );
        if points.len() > 1 {
            let coords: Vec<String> = points
                .iter()
                .map(|&(x, y)| format!("{},{}", num(self.px(x)), num(self.py(y))))
                .collect();
            let _ = writeln!(
                out,
                "<polyline points=\"{}\" fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\"/>",
                coords.join(" ")
            );
        }
        for &(x, y) in points {
            // A tooltip on hover in browsers: the exact value is otherwise only readable
            // against the gridlines.
            let tip = format!(
                "{}\n{}: {}\n{}: {}",
                series.name,
                chart.x_label,
                format_x(x),
                chart.y_label,
                format_value(y)
            );
            let _ = writeln!(
                out,
                "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" stroke=\"none\"><title>{}</title></circle>",
                num(self.px(x)),
                num(self.py(y)),
                num(MARKER_RADIUS),
                escape(&tip),
            );
        }
        out.push_str("</g>\n");
    }
}

fn open_svg(out: &mut String, title: &str) {
    let title = escape(title);
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" \
         height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">",
        w = WIDTH.round(),
        h = HEIGHT.round(),
    );
    let _ = writeln!(out, "<title>{title}</title>");
    let _ = writeln!(
        out,
        "<rect width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>",
        num(WIDTH),
        num(HEIGHT)
    );
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\" \
         fill=\"#222222\">{title}</text>",
        num(WIDTH / 2.0),
    );
}

fn draw_axis_titles(out: &mut String, x_label: &str, y_label: &str) {
    let centre_x = (PLOT_LEFT + PLOT_RIGHT) / 2.0;
    let centre_y = (PLOT_TOP + PLOT_BOTTOM) / 2.0;
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#222222\">{}</text>",
        num(centre_x),
        num(PLOT_BOTTOM + 42.0),
        escape(x_label),
    );
    // Rotated about the origin, so x is the (negated) vertical position.
    let _ = writeln!(
        out,
        "<text transform=\"rotate(-90)\" x=\"{}\" y=\"18\" text-anchor=\"middle\" \
         fill=\"#222222\">{}</text>",
        num(-centre_y),
        escape(y_label),
    );
}

/// Every series is listed, also one with nothing plottable, so that a scenario missing
/// from the chart is visibly missing rather than forgotten.
fn draw_legend(out: &mut String, series: &[Series]) {
    out.push_str("<g class=\"legend\">\n");
    for (index, s) in series.iter().enumerate() {
        let y = PLOT_TOP + 8.0 + LEGEND_ROW * index as f64;
        let color = color(index);
        let _ = writeln!(
            out,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{color}\" stroke-width=\"2\"/>",
            num(LEGEND_X),
            num(LEGEND_X + 20.0),
            y = num(y),
        );
        let _ = writeln!(
            out,
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{color}\"/>",
            num(LEGEND_X + 10.0),
            num(y),
            num(MARKER_RADIUS),
        );
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" fill=\"#222222\">{}</text>",
            num(LEGEND_X + 26.0),
            num(y + 4.0),
            escape(&shorten(&s.name, LEGEND_NAME_CHARS)),
        );
    }
    out.push_str("</g>\n");
}

fn draw_no_data(out: &mut String) {
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666666\">no data</text>",
        num(WIDTH / 2.0),
        num(HEIGHT / 2.0),
    );
}

/// A coordinate with one decimal, so that output does not depend on float noise; `-0.0`
/// is folded into `0.0` for the same reason.
fn num(v: f64) -> String {
    let rounded = (v * 10.0).round() / 10.0 + 0.0;
    format!("{rounded:.1}")
}

/// Text for element content and attribute values. Characters that XML 1.0 forbids
/// altogether (most control characters) are dropped, since no escape exists for them.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max_chars).collect();
    cut.push('\u{2026}');
    cut
}

/// A thread count: an integer.
fn format_x(x: f64) -> String {
    if (1.0..1e15).contains(&x) {
        format!("{:.0}", x.round())
    } else {
        format_value(x)
    }
}

/// A tick value. Outside the range `format_value` writes plainly, the exponent is
/// written directly so that no intermediate float can overflow.
fn format_nice(mantissa: u8, exponent: i32) -> String {
    if (-4..=14).contains(&exponent) {
        format_value(f64::from(mantissa) * 10f64.powi(exponent))
    } else {
        format!("{mantissa}e{exponent}")
    }
}

/// A measured value in at most three significant digits, with k/M/G/T suffixes from a
/// thousand up: 500, 1k, 12.3k, 1.2M, 0.5, 0.05; scientific beyond that.
fn format_value(v: f64) -> String {
    if !is_plottable(v) {
        return format!("{v}");
    }
    let r = round_significant(v, 3);
    if !(1e-4..1e15).contains(&r) {
        return scientific(r);
    }
    const UNITS: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (unit, suffix) in UNITS {
        if r >= unit {
            return format!("{}{suffix}", plain(r / unit));
        }
    }
    plain(r)
}

fn round_significant(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powf(v.log10().floor() - f64::from(digits - 1));
    let rounded = (v / scale).round() * scale;
    // Near the ends of f64 the scale under- or overflows; the raw value is still right.
    if is_plottable(rounded) {
        rounded
    } else {
        v
    }
}

/// Decimals for three significant digits, trailing zeros dropped.
fn plain(v: f64) -> String {
    let decimals = (2 - v.log10().floor() as i32).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}"))
}

fn scientific(v: f64) -> String {
    let s = format!("{v:.2e}");
    match s.split_once('e') {
        Some((mantissa, exponent)) => format!("{}e{exponent}", trim_zeros(mantissa)),
        None => s,
    }
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAMP: [f64; 8] = [1.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

    fn series(name: &str, points: &[(f64, f64)]) -> Series {
        Series {
            name: name.to_string(),
            points: points.to_vec(),
        }
    }

    fn chart(series: Vec<Series>) -> Chart {
        Chart {
            title: "Throughput".to_string(),
            x_label: "Threads".to_string(),
            y_label: "Queries per second".to_string(),
            series,
        }
    }

    fn ramp(scale: f64) -> Vec<(f64, f64)> {
        RAMP.iter().map(|&t| (t, scale * t.sqrt())).collect()
    }

    fn sample() -> Chart {
        let mut cached = ramp(900.0);
        cached.pop(); // the 256-thread run is missing
        chart(vec![
            series("direct", &ramp(1000.0)),
            series("passthrough", &ramp(800.0)),
            series("cached", &cached),
        ])
    }

    fn parse(svg: &str) -> roxmltree::Document<'_> {
        match roxmltree::Document::parse(svg) {
            Ok(doc) => doc,
            Err(e) => panic!("not well-formed XML ({e}):\n{svg}"),
        }
    }

    fn in_group<'a>(
        doc: &'a roxmltree::Document<'a>,
        class: &str,
        tag: &str,
    ) -> Vec<roxmltree::Node<'a, 'a>> {
        doc.descendants()
            .filter(|n| n.has_tag_name(tag))
            .filter(|n| n.parent().and_then(|p| p.attribute("class")) == Some(class))
            .collect()
    }

    fn texts(doc: &roxmltree::Document<'_>, class: &str) -> Vec<String> {
        in_group(doc, class, "text")
            .iter()
            .map(|n| n.text().unwrap_or("").to_string())
            .collect()
    }

    fn attr(node: &roxmltree::Node<'_, '_>, name: &str) -> f64 {
        node.attribute(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    }

    fn markers(svg: &str) -> Vec<(f64, f64)> {
        let doc = parse(svg);
        in_group(&doc, "series", "circle")
            .iter()
            .map(|n| (attr(n, "cx"), attr(n, "cy")))
            .collect()
    }

    fn edge_cases() -> Vec<(&'static str, Chart)> {
        vec![
            ("no series", chart(vec![])),
            ("empty series", chart(vec![series("direct", &[])])),
            (
                "nothing plottable",
                chart(vec![series("direct", &[(0.0, 1.0), (1.0, -1.0)])]),
            ),
            (
                "single point",
                chart(vec![series("direct", &[(16.0, 5000.0)])]),
            ),
            (
                "all x equal",
                chart(vec![
                    series("a", &[(8.0, 10.0)]),
                    series("b", &[(8.0, 30.0)]),
                ]),
            ),
            (
                "all y equal",
                chart(vec![series("direct", &[(1.0, 1000.0), (64.0, 1000.0)])]),
            ),
            (
                "extremes",
                chart(vec![series(
                    "direct",
                    &[
                        (f64::MIN_POSITIVE, f64::MAX),
                        (5e-324, 5e-324),
                        (f64::MAX, 1.0),
                        (f64::INFINITY, 1.0),
                        (f64::NAN, f64::NAN),
                    ],
                )]),
            ),
            (
                "many series",
                chart(
                    (0..20)
                        .map(|i| series(&format!("s{i}"), &ramp(f64::from(i) + 0.5)))
                        .collect(),
                ),
            ),
        ]
    }

    #[test]
    fn well_formed_standalone_svg_for_normal_and_edge_cases() {
        let mut cases = edge_cases();
        cases.push(("normal", sample()));
        for (what, chart) in cases {
            let svg = chart.svg();
            let doc = parse(&svg);
            let root = doc.root_element();
            assert_eq!(
                root.tag_name().namespace(),
                Some("http://www.w3.org/2000/svg"),
                "{what}"
            );
            assert_eq!(root.tag_name().name(), "svg", "{what}");
            assert_eq!(root.attribute("viewBox"), Some("0 0 720 420"), "{what}");
            assert_eq!(root.attribute("font-family"), Some("sans-serif"), "{what}");
            let first = root.first_element_child();
            assert_eq!(first.map(|n| n.tag_name().name()), Some("title"), "{what}");
            assert!(
                !svg.starts_with("<?xml"),
                "{what}: must be embeddable in HTML"
            );
            assert!(
                !svg.contains("NaN") && !svg.contains("inf"),
                "{what}:\n{svg}"
            );
            assert_eq!(svg, chart.svg(), "{what}: output must be deterministic");
        }
    }

    #[test]
    fn no_data_shows_title_and_message() {
        for (what, chart) in edge_cases().into_iter().take(3) {
            let svg = chart.svg();
            let doc = parse(&svg);
            let texts: Vec<&str> = doc
                .descendants()
                .filter(|n| n.has_tag_name("text"))
                .filter_map(|n| n.text())
                .collect();
            assert!(texts.contains(&"Throughput"), "{what}: {texts:?}");
            assert!(texts.contains(&"no data"), "{what}: {texts:?}");
        }
        assert!(!sample().svg().contains("no data"));
    }

    #[test]
    fn x_axis_is_log2_with_the_data_range_on_the_edges() {
        let svg = chart(vec![series(
            "direct",
            &[(16.0, 3.0), (1.0, 1.0), (4.0, 2.0)],
        )])
        .svg();
        let points = markers(&svg);
        // Drawn in x order whatever the input order.
        let xs: Vec<f64> = points.iter().map(|p| p.0).collect();
        assert_eq!(
            xs,
            vec![PLOT_LEFT, (PLOT_LEFT + PLOT_RIGHT) / 2.0, PLOT_RIGHT]
        );

        let svg = chart(vec![series("direct", &[(1.0, 1.0), (2048.0, 1.0)])]).svg();
        let xs: Vec<f64> = markers(&svg).iter().map(|p| p.0).collect();
        assert_eq!(xs, vec![PLOT_LEFT, PLOT_RIGHT]);
    }

    #[test]
    fn x_ticks_are_the_thread_counts() {
        let svg = sample().svg();
        let doc = parse(&svg);
        assert_eq!(
            texts(&doc, "x-axis"),
            vec!["1", "4", "8", "16", "32", "64", "128", "256"]
        );
    }

    #[test]
    fn crowded_x_labels_are_thinned() {
        let points: Vec<(f64, f64)> = (1..=64).map(|t| (f64::from(t), 1.0)).collect();
        let svg = chart(vec![series("direct", &points)]).svg();
        let doc = parse(&svg);
        let labels = texts(&doc, "x-axis");
        assert!(labels.len() < 20, "{labels:?}");
        assert_eq!(labels.first().map(String::as_str), Some("1"));
    }

    #[test]
    fn y_axis_pads_to_enclosing_nice_values() {
        let svg = chart(vec![series("direct", &[(1.0, 600.0), (64.0, 11_000.0)])]).svg();
        let doc = parse(&svg);
        assert_eq!(
            texts(&doc, "y-axis"),
            vec!["500", "1k", "2k", "5k", "10k", "20k"]
        );
    }

    #[test]
    fn y_axis_labels_sub_one_latencies() {
        let svg = chart(vec![series("direct", &[(1.0, 0.3), (64.0, 4.0)])]).svg();
        let doc = parse(&svg);
        assert_eq!(texts(&doc, "y-axis"), vec!["0.2", "0.5", "1", "2", "5"]);
    }

    #[test]
    fn wide_y_ranges_keep_few_gridlines() {
        let svg = chart(vec![series("direct", &[(1.0, 1e-300), (2.0, 1e300)])]).svg();
        let doc = parse(&svg);
        let labels = texts(&doc, "y-axis");
        assert!((2..=20).contains(&labels.len()), "{labels:?}");
    }

    #[test]
    fn equal_values_get_a_range_around_them() {
        let svg = chart(vec![series("direct", &[(1.0, 1000.0), (64.0, 1000.0)])]).svg();
        let doc = parse(&svg);
        assert_eq!(texts(&doc, "y-axis"), vec!["500", "1k", "2k"]);
        // 1000 is the geometric mean of 500 and 2000: the middle of the plot.
        let middle = (PLOT_TOP + PLOT_BOTTOM) / 2.0;
        assert!(markers(&svg).iter().all(|p| p.1 == middle));
    }

    #[test]
    fn a_single_point_is_centred_and_has_no_line() {
        let svg = chart(vec![series("direct", &[(16.0, 5000.0)])]).svg();
        let points = markers(&svg);
        assert_eq!(points.len(), 1);
        let (x, y) = points[0];
        assert_eq!(x, (PLOT_LEFT + PLOT_RIGHT) / 2.0);
        assert!(PLOT_TOP < y && y < PLOT_BOTTOM, "{y}");
        assert!(!svg.contains("<polyline"));
        let doc = parse(&svg);
        assert_eq!(texts(&doc, "x-axis"), vec!["16"]);
        assert_eq!(texts(&doc, "y-axis"), vec!["2k", "5k", "10k"]);
    }

    #[test]
    fn value_labels_are_short() {
        let cases = [
            (500.0, "500"),
            (1000.0, "1k"),
            (2000.0, "2k"),
            (10_000.0, "10k"),
            (12_345.0, "12.3k"),
            (1_200_000.0, "1.2M"),
            (999_999.0, "1M"),
            (3e9, "3G"),
            (2e12, "2T"),
            (0.5, "0.5"),
            (0.2, "0.2"),
            (0.05, "0.05"),
            (0.123_456, "0.123"),
            (1.0, "1"),
            (2.5, "2.5"),
            (5e15, "5e15"),
            (1.5e-7, "1.5e-7"),
        ];
        for (value, label) in cases {
            assert_eq!(format_value(value), label, "{value}");
        }
        assert_eq!(format_nice(5, -4), "0.0005");
        assert_eq!(format_nice(2, 300), "2e300");
        assert_eq!(format_x(2048.0), "2048");
        assert_eq!(format_x(16.0), "16");
    }

    #[test]
    fn coordinates_have_one_decimal() {
        assert_eq!(num(1.0 / 3.0), "0.3");
        assert_eq!(num(-0.01), "0.0");
        assert_eq!(num(355.96), "356.0");
        let svg = sample().svg();
        let doc = parse(&svg);
        for circle in doc.descendants().filter(|n| n.has_tag_name("circle")) {
            for name in ["cx", "cy", "r"] {
                let v = circle.attribute(name).unwrap_or("");
                assert_eq!(v.split_once('.').map(|(_, d)| d.len()), Some(1), "{v}");
            }
        }
    }

    #[test]
    fn text_is_escaped() {
        let nasty = "a & <b> \"c\" 'd' </svg><script>";
        let chart = Chart {
            title: nasty.to_string(),
            x_label: nasty.to_string(),
            y_label: nasty.to_string(),
            series: vec![series(nasty, &[(1.0, 1.0), (2.0, 2.0)])],
        };
        let svg = chart.svg();
        assert!(!svg.contains("<script>") && !svg.contains("<b>"));
        let doc = parse(&svg);
        let title = doc.root_element().first_element_child();
        assert_eq!(title.and_then(|n| n.text()), Some(nasty));
        let all: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .collect();
        assert_eq!(all.iter().filter(|t| **t == nasty).count(), 3, "{all:?}");

        assert_eq!(escape("a\u{0}b\u{1b}c\u{FFFF}\td"), "abc\td");
        let control = chart_with_name("bell\u{7}");
        parse(&control.svg());
    }

    fn chart_with_name(name: &str) -> Chart {
        chart(vec![series(name, &[(1.0, 1.0)])])
    }

    #[test]
    fn unplottable_points_are_skipped() {
        let svg = chart(vec![series(
            "direct",
            &[
                (0.0, 5.0),
                (-1.0, 5.0),
                (4.0, 0.0),
                (8.0, -3.0),
                (f64::NAN, 1.0),
                (16.0, f64::INFINITY),
                (32.0, f64::NAN),
                (1.0, 10.0),
                (2.0, 20.0),
            ],
        )])
        .svg();
        assert_eq!(markers(&svg).len(), 2);
        let doc = parse(&svg);
        assert_eq!(texts(&doc, "x-axis"), vec!["1", "2"]);
    }

    #[test]
    fn one_marker_per_point_and_one_line_per_series() {
        let svg = sample().svg();
        assert_eq!(markers(&svg).len(), 8 + 8 + 7);
        let doc = parse(&svg);
        let lines = in_group(&doc, "series", "polyline");
        assert_eq!(lines.len(), 3);
        let colors: Vec<Option<&str>> = in_group(&doc, "series", "polyline")
            .iter()
            .map(|n| n.parent().and_then(|p| p.attribute("stroke")))
            .collect();
        assert_eq!(
            colors,
            vec![Some(PALETTE[0]), Some(PALETTE[1]), Some(PALETTE[2])]
        );
        let cached_points = lines
            .get(2)
            .and_then(|n| n.attribute("points"))
            .map(|p| p.split(' ').count());
        assert_eq!(cached_points, Some(7));
    }

    #[test]
    fn legend_lists_every_series() {
        let mut chart = sample();
        chart.series.push(series("no results", &[(1.0, 0.0)]));
        chart
            .series
            .push(series("a rather long scenario name", &[(1.0, 1.0)]));
        let svg = chart.svg();
        let doc = parse(&svg);
        assert_eq!(
            texts(&doc, "legend"),
            vec![
                "direct",
                "passthrough",
                "cached",
                "no results",
                "a rather long sc\u{2026}"
            ]
        );
    }
}
