//! The SVG figure of an experiment: one chart per panel (lines, or stacked bars), in a grid.

use plotters::prelude::*;
use std::path::Path;

/// One chart: its series are (label, points sorted by x).
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// Intervals of x shaded in a series's colour: (series index, from, to) — the
    /// checkpoints of a time series (thesis Fig. 4.11).
    pub bands: Vec<(usize, f64, f64)>,
    /// Stacked bars instead of lines: at each x, one bar whose layers are the series'
    /// values in series order, bottom up (thesis Fig. 4.20).
    pub stacked: bool,
}

/// Line colours, in series order (distinct in print and for common colour blindness).
const COLORS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(0, 0, 0),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
];

const PANEL_W: u32 = 620;
const PANEL_H: u32 = 400;
const TITLE_H: u32 = 40;

/// Writes `charts` as one SVG file at `path`, two charts per row, under `title`.
pub fn write_svg(path: &Path, title: &str, charts: &[Chart]) -> Result<(), String> {
    let cols = charts.len().clamp(1, 2);
    let rows = charts.len().div_ceil(cols).max(1);
    let size = (PANEL_W * cols as u32, PANEL_H * rows as u32 + TITLE_H);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let body = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| e.to_string())?;
    let areas = body.split_evenly((rows, cols));
    for (chart, area) in charts.iter().zip(areas.iter()) {
        draw_chart(area, chart).map_err(|e| format!("{}: {e}", chart.title))?;
    }
    root.present().map_err(|e| e.to_string())
}

fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let xs = chart
        .series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x));
    let (mut x0, mut x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !x0.is_finite() || !x1.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        (x0, x1) = (x0 - 0.5, x1 + 0.5);
    }
    // Bars are as wide as 60% of the closest two x values (a single x: 0.6), and the axis
    // leaves room for half a bar at each end.
    let mut xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let gap = xs
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(f64::INFINITY, f64::min);
    let half = if gap.is_finite() { 0.3 * gap } else { 0.3 };
    if chart.stacked {
        (x0, x1) = (x0 - 2.0 * half, x1 + 2.0 * half);
    }
    let finite = |y: f64| if y.is_finite() { y } else { 0.0 };
    let y_max = if chart.stacked {
        xs.iter()
            .map(|&x| stack_at(chart, x, usize::MAX, finite))
            .fold(0.0_f64, f64::max)
    } else {
        chart
            .series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
            .filter(|y| y.is_finite())
            .fold(0.0_f64, f64::max)
    };
    let y1 = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut c = ChartBuilder::on(area)
        .caption(&chart.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..y1)?;
    c.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .y_label_formatter(&|v| short(*v))
        .draw()?;
    for &(i, a, b) in &chart.bands {
        let color = COLORS[i % COLORS.len()];
        let (a, b) = (a.max(x0), b.min(x1));
        if a < b {
            c.draw_series(std::iter::once(Rectangle::new(
                [(a, 0.0), (b, y1)],
                color.mix(0.12).filled(),
            )))?;
        }
    }
    for (i, (label, points)) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        if chart.stacked {
            c.draw_series(points.iter().map(|&(x, y)| {
                let base = stack_at(chart, x, i, finite);
                Rectangle::new(
                    [(x - half, base), (x + half, base + finite(y))],
                    color.filled(),
                )
            }))?
            .label(label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
            continue;
        }
        c.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))?
        .label(label.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        c.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

/// The sum at `x` of the first `below` series of a stacked chart (all of them for
/// `usize::MAX`): the base of series `below`'s layer there.
fn stack_at(chart: &Chart, x: f64, below: usize, finite: impl Fn(f64) -> f64) -> f64 {
    chart
        .series
        .iter()
        .take(below)
        .flat_map(|(_, p)| {
            p.iter()
                .filter(|&&(px, _)| px == x)
                .map(|&(_, y)| finite(y))
        })
        .sum()
}

/// 1234567 -> "1.23M": axis labels that fit.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}K", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}K", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(0.5), "0.50");
        assert_eq!(short(950.0), "950");
        assert_eq!(short(1500.0), "1.5K");
        assert_eq!(short(250_000.0), "250K");
        assert_eq!(short(1_234_567.0), "1.23M");
    }

    #[test]
    fn writes_every_series_label_and_title() {
        let dir = std::env::temp_dir().join(format!("myriad-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        let charts = vec![
            Chart {
                title: "read-intensive".into(),
                x_label: "theta".into(),
                y_label: "txn/s".into(),
                series: vec![
                    ("N2O".into(), vec![(0.2, 10.0), (0.9, 30.0)]),
                    ("O2N".into(), vec![(0.2, 8.0), (0.9, 5.0)]),
                ],
                bands: Vec::new(),
                stacked: false,
            },
            // A chart with one x value and only zeros still draws.
            Chart {
                title: "flat".into(),
                x_label: "s".into(),
                y_label: "MiB".into(),
                series: vec![("none".into(), vec![(1.0, 0.0), (4.0, 1.0)])],
                // A checkpoint shaded, one cut at the axis's end.
                bands: vec![(0, 2.0, 3.0), (0, 3.5, 9.0)],
                stacked: false,
            },
        ];
        write_svg(&path, "chain-order", &charts).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in [
            "chain-order",
            "read-intensive",
            "N2O",
            "O2N",
            "flat",
            "txn/s",
        ] {
            assert!(svg.contains(text), "{text} missing from the SVG");
        }
        // The two checkpoint bands, translucent in the first series's colour.
        let bands = svg
            .lines()
            .filter(|l| l.contains("opacity=\"0.12\""))
            .count();
        assert_eq!(bands, 2, "{svg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A stacked chart draws one bar layer per series and x, each on the layers below it:
    /// at x = 2 the layers 1, 2 and 4 end at 1, 3 and 7, the axis's top (7 × 1.1) above them.
    #[test]
    fn stacked_bars_sit_on_the_layers_below() {
        let chart = Chart {
            title: "breakdown".into(),
            x_label: "threads".into(),
            y_label: "s".into(),
            series: vec![
                ("load".into(), vec![(1.0, 1.0), (2.0, 1.0)]),
                ("wait".into(), vec![(1.0, 0.0), (2.0, 2.0)]),
                ("run".into(), vec![(1.0, 5.0), (2.0, 4.0)]),
            ],
            bands: Vec::new(),
            stacked: true,
        };
        assert_eq!(stack_at(&chart, 2.0, 0, |y| y), 0.0);
        assert_eq!(stack_at(&chart, 2.0, 1, |y| y), 1.0);
        assert_eq!(stack_at(&chart, 2.0, 2, |y| y), 3.0);
        assert_eq!(stack_at(&chart, 2.0, usize::MAX, |y| y), 7.0);
        assert_eq!(stack_at(&chart, 1.0, usize::MAX, |y| y), 6.0);
        let dir = std::env::temp_dir().join(format!("myriad-stack-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.svg");
        write_svg(&path, "fig", std::slice::from_ref(&chart)).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in ["breakdown", "load", "wait", "run"] {
            assert!(svg.contains(text), "{text} missing from the SVG");
        }
        // Six layers (3 series × 2 x) and three legend swatches, filled in the series'
        // colours; no line is drawn.
        let filled = |c: RGBColor| {
            let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
            svg.split("<rect")
                .skip(1)
                .filter(|r| {
                    r.split('>')
                        .next()
                        .is_some_and(|attrs| attrs.contains(&fill))
                })
                .count()
        };
        assert_eq!(
            (filled(COLORS[0]), filled(COLORS[1]), filled(COLORS[2])),
            (3, 3, 3),
            "{svg}"
        );
        for c in &COLORS[..3] {
            let line = format!("stroke=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
            assert!(!svg.contains(&line), "a line in a series colour: {svg}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
