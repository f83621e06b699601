//! The one report format of every benchmark scenario: a [`Document`] of facts, sections
//! (tables, notes, charts) and commands, written as results.md, results.json,
//! results.csv, report.html and charts/*.svg. Scenarios build a document from their
//! results; `sluice bench all` puts several on one HTML page.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::chart::{escape, Chart};

/// A table of numbers, already formatted.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(title: impl Into<String>, header: &[&str]) -> Table {
        Table {
            title: title.into(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// The table as CSV, header first.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
            let _ = writeln!(out, "{}", fields.join(","));
        }
        out
    }
}

/// A chart and the name of its SVG file (without extension).
pub struct NamedChart {
    pub file_stem: String,
    pub chart: Chart,
}

/// One part of a report: its tables, why cells are empty, charts.
pub struct Section {
    pub title: String,
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
    pub charts: Vec<NamedChart>,
}

/// A scenario's whole report, ready to be written in every format.
pub struct Document {
    pub title: String,
    /// What the run was and where, one per line: Markdown list items without the dash,
    /// with `**bold**` as the only markup.
    pub facts: Vec<String>,
    /// A long explanation shown as preformatted text (why the run stopped, with the
    /// tool's output); its first line is expected among the facts.
    pub detail: Option<String>,
    /// How to read the tables.
    pub legend: Option<String>,
    pub sections: Vec<Section>,
    /// Every command line, grouped under a title.
    pub commands: Vec<(String, Vec<String>)>,
    /// Said under the commands in Markdown: how they ran.
    pub commands_note: Option<String>,
    /// results.csv: one row per measurement.
    pub csv: String,
    /// results.json: everything the scenario knows, for scripts.
    pub json: String,
}

impl Document {
    /// Writes results.md, results.json, results.csv, report.html and the charts' SVG
    /// files into `dir`; returns the paths of the first four.
    pub fn write(&self, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let charts_dir = dir.join("charts");
        if self.sections.iter().any(|s| !s.charts.is_empty()) {
            std::fs::create_dir_all(&charts_dir)
                .with_context(|| format!("creating {}", charts_dir.display()))?;
        }
        for section in &self.sections {
            for chart in &section.charts {
                let path = charts_dir.join(format!("{}.svg", chart.file_stem));
                std::fs::write(&path, chart.chart.svg())
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        let files = [
            ("results.md", self.markdown()),
            ("results.json", self.json.clone()),
            ("results.csv", self.csv.clone()),
            ("report.html", html_page(&self.title, &[], &[self])),
        ];
        let mut paths = Vec::new();
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            paths.push(path);
        }
        Ok(paths)
    }

    /// The whole report as Markdown (results.md).
    pub fn markdown(&self) -> String {
        let mut out = format!("# {}\n\n", self.title);
        for fact in &self.facts {
            let _ = writeln!(out, "- {fact}");
        }
        if let Some(detail) = self.detail.as_ref().filter(|d| d.lines().count() > 1) {
            let _ = writeln!(out, "\n```text\n{detail}\n```");
        }
        out.push('\n');
        if let Some(legend) = &self.legend {
            let _ = write!(out, "{legend}\n\n");
        }
        out.push_str("## Results\n\n");
        out.push_str(&markdown_sections(&self.sections));
        if self.sections.iter().any(|s| !s.charts.is_empty()) {
            out.push_str("## Charts\n\n");
            for section in &self.sections {
                for chart in &section.charts {
                    let _ = writeln!(
                        out,
                        "![{}](charts/{}.svg)",
                        chart.chart.title, chart.file_stem
                    );
                }
            }
        }
        if !self.commands.is_empty() {
            out.push_str("\n## Commands\n\n");
            for (title, lines) in &self.commands {
                let _ = writeln!(out, "{title}\n\n```sh");
                for line in lines {
                    let _ = writeln!(out, "{line}");
                }
                out.push_str("```\n\n");
            }
            if let Some(note) = &self.commands_note {
                let _ = writeln!(out, "{note}");
            }
        }
        out
    }

    /// The report as HTML elements, its title at heading level `level` and everything
    /// else below it.
    fn html_body(&self, level: usize) -> String {
        let (h, h2, h3) = (level, level + 1, level + 2);
        let mut out = format!("<h{h}>{}</h{h}>\n<ul>\n", escape(&self.title));
        for fact in &self.facts {
            let _ = writeln!(out, "<li>{}</li>", inline_markdown(fact));
        }
        out.push_str("</ul>\n");
        if let Some(detail) = &self.detail {
            let _ = writeln!(out, "<pre>{}</pre>", escape(detail));
        }
        if let Some(legend) = &self.legend {
            let _ = writeln!(out, "<p class=\"legend\">{}</p>", escape(legend));
        }
        for section in &self.sections {
            let _ = writeln!(out, "<section>\n<h{h2}>{}</h{h2}>", escape(&section.title));
            if !section.charts.is_empty() {
                out.push_str("<div class=\"charts\">\n");
                for chart in &section.charts {
                    let _ = writeln!(out, "<figure>{}</figure>", chart.chart.svg());
                }
                out.push_str("</div>\n");
            }
            for table in &section.tables {
                out.push_str(&html_table(table));
            }
            if !section.notes.is_empty() {
                out.push_str("<ul class=\"notes\">\n");
                for note in &section.notes {
                    let _ = writeln!(out, "<li>{}</li>", escape(note));
                }
                out.push_str("</ul>\n");
            }
            out.push_str("</section>\n");
        }
        if !self.commands.is_empty() {
            let _ = writeln!(out, "<section>\n<h{h2}>Commands</h{h2}>");
            for (title, lines) in &self.commands {
                let _ = writeln!(
                    out,
                    "<h{h3}>{}</h{h3}>\n<pre>{}</pre>",
                    escape(title),
                    escape(&lines.join("\n"))
                );
            }
            out.push_str("</section>\n");
        }
        out
    }
}

/// One self-contained HTML page (charts inline: it opens from a file, offline) holding
/// `documents`. With one document, the page is that report; with several, each is an
/// article under the page's own title and `intro` lines.
pub fn html_page(title: &str, intro: &[String], documents: &[&Document]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(title)
    );
    match documents {
        [only] if intro.is_empty() => out.push_str(&only.html_body(1)),
        _ => {
            let _ = writeln!(out, "<h1>{}</h1>", escape(title));
            if !intro.is_empty() {
                out.push_str("<ul>\n");
                for line in intro {
                    let _ = writeln!(out, "<li>{}</li>", inline_markdown(line));
                }
                out.push_str("</ul>\n");
            }
            for document in documents {
                let _ = write!(out, "<article>\n{}</article>\n", document.html_body(2));
            }
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn markdown_table(t: &Table) -> String {
    let mut out = format!("**{}**\n\n| {} |\n|", t.title, t.header.join(" | "));
    for _ in &t.header {
        out.push_str("---:|");
    }
    out.push('\n');
    for row in &t.rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// The sections' tables and notes as Markdown: what the terminal shows at the end.
pub fn markdown_sections(sections: &[Section]) -> String {
    let mut out = String::new();
    for section in sections {
        let _ = writeln!(out, "### {}\n", section.title);
        for table in &section.tables {
            out.push_str(&markdown_table(table));
            out.push('\n');
        }
        for note in &section.notes {
            let _ = writeln!(out, "- {note}");
        }
        if !section.notes.is_empty() {
            out.push('\n');
        }
    }
    out
}

fn html_table(t: &Table) -> String {
    let mut out = format!(
        "<table>\n<caption>{}</caption>\n<thead><tr>",
        escape(&t.title)
    );
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for c in row {
            let class = match c.as_str() {
                "FAILED" | "skipped" => " class=\"bad\"",
                "n/a" | "—" => " class=\"na\"",
                _ => "",
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// `**bold**` in a fact line, everything else escaped.
fn inline_markdown(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split("**").enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<strong>{}</strong>", escape(part));
        } else {
            out.push_str(&escape(part));
        }
    }
    out
}

/// A CSV field, quoted when it must be (RFC 4180); line breaks become spaces so that a
/// record stays on one line.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\"").replace('\n', " "))
    } else {
        s.to_string()
    }
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;\
color:#222}table{border-collapse:collapse;margin:1em 0}caption{text-align:left;\
font-weight:bold;padding:.3em 0}th,td{border:1px solid #ccc;padding:.25em .6em;\
text-align:right}th{background:#f4f4f4}td.bad{color:#b00;font-weight:bold}td.na{color:#888}\
.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0;flex:1 1 360px;max-width:600px}\
figure svg{width:100%;height:auto}pre{background:#f7f7f7;padding:.6em;overflow-x:auto;\
white-space:pre-wrap}.legend{color:#555;font-size:.9em}article{border-top:3px solid #ccc;\
margin-top:2em}";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::Series;

    fn document(title: &str) -> Document {
        let mut table = Table::new("Throughput", &["threads", "qps"]);
        table.rows.push(vec!["4".into(), "1,234".into()]);
        table.rows.push(vec!["8".into(), "FAILED".into()]);
        Document {
            title: title.into(),
            facts: vec!["Started now, **finished**.".into()],
            detail: None,
            legend: Some("qps: queries per second.".into()),
            sections: vec![Section {
                title: "oltp_read_only".into(),
                tables: vec![table],
                notes: vec!["8 threads: sysbench failed".into()],
                charts: vec![NamedChart {
                    file_stem: "qps".into(),
                    chart: Chart {
                        title: "throughput".into(),
                        x_label: "threads".into(),
                        y_label: "queries/s".into(),
                        series: vec![Series {
                            name: "direct".into(),
                            points: vec![(4.0, 1234.0)],
                        }],
                    },
                }],
            }],
            commands: vec![("Sluice".into(), vec!["sluice serve".into()])],
            commands_note: None,
            csv: "threads,qps\n".into(),
            json: "{}\n".into(),
        }
    }

    #[test]
    fn markdown_holds_every_part() {
        let md = document("Sluice benchmark: mux").markdown();
        assert!(md.starts_with("# Sluice benchmark: mux\n\n- Started now, **finished**.\n"));
        assert!(md.contains("\nqps: queries per second.\n\n## Results\n\n### oltp_read_only\n"));
        assert!(
            md.contains("**Throughput**\n\n| threads | qps |\n|---:|---:|\n| 4 | 1,234 |\n"),
            "{md}"
        );
        assert!(md.contains("- 8 threads: sysbench failed\n"));
        assert!(md.contains("![throughput](charts/qps.svg)"));
        assert!(md.contains("## Commands\n\nSluice\n\n```sh\nsluice serve\n```\n"));
    }

    #[test]
    fn one_page_holds_several_documents() {
        let (a, b) = (document("first"), document("second"));
        let page = html_page(
            "Sluice benchmarks",
            &["two **scenarios**".into()],
            &[&a, &b],
        );
        assert_eq!(page.matches("<article>").count(), 2);
        assert!(page.contains("<h1>Sluice benchmarks</h1>"));
        assert!(page.contains("<h2>first</h2>") && page.contains("<h2>second</h2>"));
        assert!(page.contains("<h3>oltp_read_only</h3>"));
        assert!(page.contains("<li>two <strong>scenarios</strong></li>"));
        assert_eq!(page.matches("<svg").count(), 2);
        assert!(page.contains("<td class=\"bad\">FAILED</td>"));
        let single = html_page("first", &[], &[&a]);
        assert!(single.contains("<h1>first</h1>") && !single.contains("<article>"));
    }

    #[test]
    fn csv_quotes_what_it_must() {
        let mut t = Table::new("t", &["a", "b"]);
        t.rows.push(vec!["x,y".into(), "say \"hi\"".into()]);
        assert_eq!(t.csv(), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
    }
}
