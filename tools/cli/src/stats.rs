//! Figures over rounds: medians, ranges and round-by-round ratios, as the benchmarks print
//! them (a single run on a shared machine swings; ratios within a round do not).

/// Round-by-round quotients `a[i] / b[i]`.
pub fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

/// The median of `v`, or `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => None,
        n if n % 2 == 1 => Some(s[n / 2]),
        n => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

/// "median [min - max]" of `v` (two decimals), or "-" when empty.
pub fn spread(v: &[f64]) -> String {
    let Some(m) = median(v) else {
        return "-".into();
    };
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m:.2} [{lo:.2} - {hi:.2}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_median_and_range() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), "2.00 [1.00 - 3.00]");
        assert_eq!(spread(&[4.0, 1.0, 2.0, 3.0]), "2.50 [1.00 - 4.00]");
        assert_eq!(spread(&[]), "-");
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn ratios_pair_rounds() {
        assert_eq!(ratios(&[2.0, 9.0], &[4.0, 3.0]), vec![0.5, 3.0]);
    }
}
