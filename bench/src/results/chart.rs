//! Line charts as SVG (plotters' SVG backend: text stays `<text>`, so no font files are needed).

use plotters::prelude::*;

use crate::error::BenchError;

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart: one line with point markers per series, y from 0, a legend.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

impl LineChart {
    pub fn to_svg(&self) -> Result<String, BenchError> {
        let err = |e: &dyn std::fmt::Debug| {
            BenchError::Tool(format!("drawing chart {:?}: {e:?}", self.title))
        };
        let finite = |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite();
        let points: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied().filter(finite))
            .collect();
        let (mut x0, mut x1) = points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(p.0), b.max(p.0))
            });
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 <= x0 {
            (x0, x1) = (x0 - 1.0, x1 + 1.0);
        }
        let pad = (x1 - x0) * 0.03;
        let y1 = points.iter().map(|p| p.1).fold(0.0, f64::max);
        let y1 = if y1 > 0.0 { y1 * 1.15 } else { 1.0 };

        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (860, 500)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| err(&e))?;
            let mut chart = ChartBuilder::on(&root)
                .caption(&self.title, ("sans-serif", 20))
                .margin(14)
                .x_label_area_size(44)
                .y_label_area_size(78)
                .build_cartesian_2d((x0 - pad)..(x1 + pad), 0.0..y1)
                .map_err(|e| err(&e))?;
            chart
                .configure_mesh()
                .x_desc(&self.x_label)
                .y_desc(&self.y_label)
                .x_label_formatter(&|v| short_number(*v))
                .y_label_formatter(&|v| short_number(*v))
                .draw()
                .map_err(|e| err(&e))?;
            for (i, s) in self.series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(finite).collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(|e| err(&e))?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| err(&e))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
            root.present().map_err(|e| err(&e))?;
        }
        Ok(svg)
    }
}

/// Axis labels: 12000 -> "12k", 0.5 -> "0.5".
fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_numbers_are_short() {
        assert_eq!(short_number(12000.0), "12k");
        assert_eq!(short_number(2_500_000.0), "2.5M");
        assert_eq!(short_number(0.5), "0.5");
        assert_eq!(short_number(300.0), "300");
    }
}
