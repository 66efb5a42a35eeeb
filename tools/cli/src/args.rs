//! A tiny `--key value` / `--flag` parser (no dependency needed for the
//! handful of options these tools take).

use std::collections::HashMap;
use std::str::FromStr;

/// Parsed options of one subcommand.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<String, String>,
    flags: Vec<String>,
}

impl Args {
    /// Parses `args`; `flags` names the options that take no value.
    pub fn parse(args: &[String], flags: &[&str]) -> Result<Self, String> {
        let mut out = Args::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let key = a
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {a:?} (options start with --)"))?;
            if let Some((k, v)) = key.split_once('=') {
                out.values.insert(k.to_owned(), v.to_owned());
            } else if flags.contains(&key) {
                out.flags.push(key.to_owned());
            } else {
                let v = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
                out.values.insert(key.to_owned(), v.clone());
            }
        }
        Ok(out)
    }

    /// Whether `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// The value of `--name`, parsed, or `default`.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| format!("--{name} {v:?}: {e}")),
        }
    }

    /// The comma-separated values of `--name`, each parsed, or those of
    /// `default` (`;` is not a separator: it belongs to provider names
    /// such as `udp;ofi_rxd`).
    pub fn list<T: FromStr>(&self, name: &str, default: &str) -> Result<Vec<T>, String>
    where
        T::Err: std::fmt::Display,
    {
        self.values
            .get(name)
            .map_or(default, String::as_str)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().map_err(|e| format!("--{name} {s:?}: {e}")))
            .collect()
    }

    /// The value of `--name` as given, if any.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value of `--name`, parsed; an error if absent.
    pub fn require<T: FromStr>(&self, name: &str) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        let v = self
            .values
            .get(name)
            .ok_or_else(|| format!("--{name} is required"))?;
        v.parse().map_err(|e| format!("--{name} {v:?}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_values_and_flags() {
        let a = Args::parse(
            &s(&["--driver", "--iters", "10", "--mode=native"]),
            &["driver"],
        )
        .unwrap();
        assert!(a.flag("driver"));
        assert_eq!(a.get("iters", 5u32).unwrap(), 10);
        assert_eq!(a.get::<String>("mode", "x".into()).unwrap(), "native");
        assert_eq!(a.get("size", 64usize).unwrap(), 64);
        assert!(a.require::<u16>("port").is_err());
        assert!(Args::parse(&s(&["--iters"]), &[]).is_err());
        assert!(Args::parse(&s(&["stray"]), &[]).is_err());
    }
}
