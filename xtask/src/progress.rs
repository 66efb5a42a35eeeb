//! Progress of long-running steps: a line when a step starts and one with its elapsed time
//! when it ends, so a person (or a CI log) sees what runs and how long each part took.

use std::time::{Duration, Instant};

/// Seconds with one decimal below ten minutes, minutes and seconds above.
pub fn elapsed(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 600.0 {
        format!("{s:.1} s")
    } else {
        format!("{}m {:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

/// Runs `f` as the step `name`, printing `xtask: ▶ name` before and
/// `xtask: ✓ name (12.3 s)` or `xtask: ✗ name failed after 12.3 s` after.
pub fn step<T>(name: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    eprintln!("xtask: ▶ {name}");
    let t0 = Instant::now();
    let result = f();
    let took = elapsed(t0.elapsed());
    match &result {
        Ok(_) => eprintln!("xtask: ✓ {name} ({took})"),
        Err(_) => eprintln!("xtask: ✗ {name} failed after {took}"),
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_reads_well() {
        assert_eq!(elapsed(Duration::from_millis(12_340)), "12.3 s");
        assert_eq!(elapsed(Duration::from_secs(754)), "12m 34s");
    }

    #[test]
    fn step_passes_results_through() {
        assert_eq!(step("ok", || Ok(3)), Ok(3));
        assert_eq!(
            step("fails", || Err::<(), _>("no".to_string())),
            Err("no".into())
        );
    }
}
