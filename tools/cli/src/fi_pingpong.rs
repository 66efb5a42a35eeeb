//! Runs Debian's `fi_pingpong` (libfabric-bin) between two test hosts, one process per network
//! namespace, and parses its result table — so the `xdp` provider is measured beside `tcp` and
//! `udp;ofi_rxd` by the same program, between the same hosts, in one run.
//!
//! `fi_pingpong` exchanges endpoint names over a TCP control connection (port 47592 by
//! default, `-B`/`-P`) and then ping-pongs over the provider; the client prints one row per
//! transfer size: `bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ofi_xdp_testhosts::{Host, HostPair};

use crate::child::{ChildGuard, wait_output};

/// One `fi_pingpong` invocation: provider, endpoint type, mode and sizes.
#[derive(Debug, Clone)]
pub struct Run {
    /// `-p`: `xdp`, `tcp`, `udp;ofi_rxd`, …
    pub provider: String,
    /// `-e`: `rdm`, `dgram` or `msg`.
    pub endpoint: String,
    /// `-m`: `msg` or `tagged`.
    pub mode: String,
    /// `-S`: one size in bytes or `all`.
    pub sizes: String,
    /// `-I`: iterations per size (fi_pingpong's default is 10).
    pub iterations: Option<u32>,
    /// `-c`: verify the data of every transfer.
    pub check: bool,
    /// Upper bound for the whole run; both processes are killed (by PID) past it.
    pub timeout: Duration,
}

/// One row of fi_pingpong's table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub bytes: u64,
    pub iterations: u64,
    pub mb_per_sec: f64,
    pub usec_per_xfer: f64,
}

impl Run {
    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "-p".to_owned(),
            self.provider.clone(),
            "-e".to_owned(),
            self.endpoint.clone(),
            "-m".to_owned(),
            self.mode.clone(),
            "-S".to_owned(),
            self.sizes.clone(),
        ];
        if let Some(iterations) = self.iterations {
            args.push("-I".to_owned());
            args.push(iterations.to_string());
        }
        if self.check {
            args.push("-c".to_owned());
        }
        args
    }
}

/// How often the client is retried while the server is still starting to listen.
const CLIENT_ATTEMPTS: u32 = 50;
const CLIENT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Runs the server in `pair.a` and the client in `pair.b`; returns the client's rows.
/// `env` is added to both processes (e.g. `FI_PROVIDER_PATH`, `FI_XDP_*`).
pub fn run(pair: &HostPair, run: &Run, env: &[(String, String)]) -> Result<Vec<Row>, String> {
    run_between(&pair.a, &pair.b, run, env).map(|f| f.rows)
}

/// A successful run: the client's rows and what each side wrote to stderr.
pub struct Finished {
    pub rows: Vec<Row>,
    pub server_stderr: String,
    pub client_stderr: String,
}

/// [`run`] with the server in `server_host` and the client in `client_host` (the same host for
/// two processes on one machine), keeping both processes' stderr (where a provider's
/// diagnostics go).
pub fn run_between(
    server_host: &Host,
    client_host: &Host,
    run: &Run,
    env: &[(String, String)],
) -> Result<Finished, String> {
    let deadline = Instant::now() + run.timeout;
    let command = |host: &Host| {
        let mut cmd = host.command("fi_pingpong");
        cmd.args(run.args())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    };
    let mut server = ChildGuard(
        command(server_host)
            .spawn()
            .map_err(|e| format!("cannot start fi_pingpong (is libfabric-bin installed?): {e}"))?,
    );
    let mut attempt = 0;
    let client_out = loop {
        attempt += 1;
        let mut client_cmd = command(client_host);
        client_cmd.arg(server_host.ipv4().to_string());
        let client = ChildGuard(
            client_cmd
                .spawn()
                .map_err(|e| format!("cannot start fi_pingpong client: {e}"))?,
        );
        let out = wait_output(client, deadline, "fi_pingpong")?;
        // A client that could not reach the control port yet fails at once; the server is
        // still waiting, so try again.
        let refused = !out.success && out.stderr.contains("Connection refused");
        if refused && attempt < CLIENT_ATTEMPTS && !server.exited() {
            std::thread::sleep(CLIENT_RETRY_DELAY);
            continue;
        }
        break out;
    };
    let server_out = wait_output(server, deadline, "fi_pingpong")?;
    if !client_out.success || !server_out.success {
        return Err(format!(
            "fi_pingpong -p {} failed\n--- client ---\n{}{}\n--- server ---\n{}{}",
            run.provider,
            client_out.stdout,
            client_out.stderr,
            server_out.stdout,
            server_out.stderr
        ));
    }
    let rows = parse_table(&client_out.stdout);
    if rows.is_empty() {
        return Err(format!(
            "fi_pingpong -p {} printed no result rows:\n{}",
            run.provider, client_out.stdout
        ));
    }
    Ok(Finished {
        rows,
        server_stderr: server_out.stderr,
        client_stderr: client_out.stderr,
    })
}

/// Parses the rows under fi_pingpong's `bytes #sent …` header; sizes look like `64`, `1k`,
/// `1m`, counts like `10k` or `=10k`.
pub fn parse_table(text: &str) -> Vec<Row> {
    text.lines()
        .skip_while(|line| !line.trim_start().starts_with("bytes"))
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 8 {
                return None;
            }
            Some(Row {
                bytes: parse_scaled(cols[0], 1024)?,
                iterations: parse_scaled(cols[1], 1000)?,
                mb_per_sec: cols[5].parse().ok()?,
                usec_per_xfer: cols[6].parse().ok()?,
            })
        })
        .collect()
}

/// fi_pingpong prints sizes with binary suffixes (`4k` = 4096, `1m` = 1048576) and counts with
/// decimal ones (`10k` = 10000, `=10k` on the ack column); `base` says which.
fn parse_scaled(text: &str, base: u64) -> Option<u64> {
    let text = text.trim_start_matches('=');
    let (digits, scale) = match text.chars().last()? {
        'k' => (&text[..text.len() - 1], base),
        'm' => (&text[..text.len() - 1], base * base),
        'g' => (&text[..text.len() - 1], base * base * base),
        _ => (text, 1),
    };
    if let Ok(whole) = digits.parse::<u64>() {
        return whole.checked_mul(scale);
    }
    let value: f64 = digits.parse().ok()?;
    Some((value * scale as f64) as u64)
}

/// True when Debian's `fi_pingpong` is on PATH.
pub fn available() -> bool {
    Command::new("fi_pingpong")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fi_pingpong_rows() {
        let text = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n\
                    64      10k     =10k     1.2m        7.85s      0.16     392.73       0.00\n\
                    1m      10      =10      20m         0.10s    200.00    5000.00       0.00\n";
        let rows = parse_table(text);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].bytes, 64);
        assert_eq!(rows[0].iterations, 10_000);
        assert_eq!(rows[0].usec_per_xfer, 392.73);
        assert_eq!(rows[1].bytes, 1 << 20);
        assert_eq!(rows[1].mb_per_sec, 200.0);
    }
}
