//! The stream benchmark's figures: every round's sample per provider and case, the raw link's
//! packet rate per round, and what is printed from them — medians with ranges, and the ratios
//! the throughput targets compare, each taken within a round.

use std::collections::BTreeMap;

use super::{Case, Op, Sample, udp_payload};
use crate::stats::{ratios, spread};

pub const CSV_HEADER: &str = "mtu,round,path,bytes,window,mb_per_s,msgs_per_s,op\n";

/// All figures of one MTU.
pub struct Results {
    pub mtu: u32,
    pub providers: Vec<String>,
    pub cases: Vec<Case>,
    /// (provider, case) → one sample per round, `None` where the run failed.
    samples: BTreeMap<(String, Case), Vec<Option<Sample>>>,
    /// The raw link's one-way datagrams per second, one per round.
    pub link_pps: Vec<f64>,
}

impl Results {
    pub fn new(mtu: u32, providers: &[String], cases: &[Case]) -> Results {
        Results {
            mtu,
            providers: providers.to_vec(),
            cases: cases.to_vec(),
            samples: BTreeMap::new(),
            link_pps: Vec::new(),
        }
    }

    pub fn record(&mut self, provider: &str, case: Case, round: usize, sample: Sample) {
        let rounds = self.samples.entry((provider.to_owned(), case)).or_default();
        if rounds.len() < round {
            rounds.resize(round, None);
        }
        rounds[round - 1] = Some(sample);
    }

    /// Per round (aligned with other series; `NaN` where a run failed).
    fn series(&self, provider: &str, case: Case, pick: fn(&Sample) -> f64) -> Vec<f64> {
        self.samples
            .get(&(provider.to_owned(), case))
            .map(|v| {
                v.iter()
                    .map(|s| s.as_ref().map_or(f64::NAN, pick))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn mb_per_s(&self, provider: &str, case: Case) -> Vec<f64> {
        self.series(provider, case, |s| s.mb_per_s)
    }

    fn msgs_per_s(&self, provider: &str, case: Case) -> Vec<f64> {
        self.series(provider, case, |s| s.msgs_per_s / 1e6)
    }

    /// Our payload per datagram at this MTU: the UDP payload less the protocol's header and
    /// trailer.
    pub fn payload_per_datagram(&self) -> usize {
        udp_payload(self.mtu).saturating_sub(ofi_xdp_reliability::wire::DATA_OVERHEAD)
    }

    /// The raw link's one-way payload rate in MB/s per round, with our payload per datagram.
    pub fn link_payload_mb_per_s(&self) -> Vec<f64> {
        let payload = self.payload_per_datagram() as f64;
        self.link_pps
            .iter()
            .map(|pps| pps * payload / 1e6)
            .collect()
    }

    /// The operations measured, each once, in the order of the cases.
    fn ops(&self) -> Vec<Op> {
        let mut ops: Vec<Op> = Vec::new();
        for c in &self.cases {
            if !ops.contains(&c.op) {
                ops.push(c.op);
            }
        }
        ops
    }

    /// What the runs measured, as the table's heading says it.
    fn semantics(&self) -> String {
        let ops = self.ops();
        if ops == [Op::Tagged] {
            return "tagged messages in flight (fi_rdm_tagged_bw semantics)".into();
        }
        let what = |op: Op| match op {
            Op::Tagged => "tagged messages (fi_rdm_tagged_bw)",
            Op::Write => "RMA writes (fi_rma_bw -o write)",
            Op::Read => "RMA reads (fi_rma_bw -o read)",
        };
        let list: Vec<&str> = ops.into_iter().map(what).collect();
        format!("{} in flight", list.join(", "))
    }

    pub fn print(&self, rounds: usize) {
        println!(
            "\nMTU {}: a window of {}; {rounds} rounds, median [min - max]",
            self.mtu,
            self.semantics()
        );
        let width = self
            .cases
            .iter()
            .map(|c| c.label().len())
            .fold(14, usize::max);
        print!("{:<width$}", "case");
        for p in &self.providers {
            print!(" {:>28}", format!("{p} MB/s"));
        }
        println!();
        for &case in self.cases.iter().filter(|&&c| c != Case::RATE) {
            print!("{:<width$}", case.label());
            for p in &self.providers {
                print!(" {:>28}", spread(&finite(&self.mb_per_s(p, case))));
            }
            println!();
        }
        if self.cases.contains(&Case::RATE) {
            print!("{:<width$}", "64 B w64");
            for p in &self.providers {
                let rate = spread(&finite(&self.msgs_per_s(p, Case::RATE)));
                print!(" {:>28}", format!("{rate} M/s"));
            }
            println!();
        }
        let pps: Vec<f64> = self.link_pps.iter().map(|p| p / 1e6).collect();
        println!(
            "raw AF_XDP link one way, {} B datagrams: {} Mpps = {} MB/s of our payload ({} B \
             per datagram)",
            udp_payload(self.mtu),
            spread(&pps),
            spread(&self.link_payload_mb_per_s()),
            self.payload_per_datagram()
        );
        self.print_ratios();
    }

    fn print_ratios(&self) {
        let (xdp, tcp) = ("xdp", "tcp");
        if !self.providers.iter().any(|p| p == xdp) {
            return;
        }
        let big = |window| Case::tagged(1 << 20, window);
        let line = |what: &str, v: Vec<f64>, target: &str| {
            println!("  {what:<44} {:<26} {target}", spread(&finite(&v)));
        };
        println!("ratios within each round, median [min - max] (targets):");
        if self.cases.contains(&big(16)) {
            line(
                "1 MiB w16: xdp / raw link payload rate",
                ratios(&self.mb_per_s(xdp, big(16)), &self.link_payload_mb_per_s()),
                "(>= 0.8)",
            );
            line(
                "1 MiB w16: xdp / tcp",
                ratios(&self.mb_per_s(xdp, big(16)), &self.mb_per_s(tcp, big(16))),
                "",
            );
        }
        if self.cases.contains(&big(1)) && self.cases.contains(&big(16)) {
            line(
                "1 MiB: xdp w1 / xdp w16",
                ratios(&self.mb_per_s(xdp, big(1)), &self.mb_per_s(xdp, big(16))),
                "(>= 0.7)",
            );
        }
        if self.providers.iter().any(|p| p == tcp) {
            for op in self.ops().into_iter().filter(|&op| op != Op::Tagged) {
                let case = Case { op, ..big(16) };
                if self.cases.contains(&case) {
                    line(
                        &format!("1 MiB w16 {}: xdp / tcp", op.name()),
                        ratios(&self.mb_per_s(xdp, case), &self.mb_per_s(tcp, case)),
                        "",
                    );
                }
            }
        }
        if !self.cases.contains(&Case::RATE) {
            return;
        }
        line(
            "64 B w64 message rate: xdp / tcp",
            ratios(
                &self.msgs_per_s(xdp, Case::RATE),
                &self.msgs_per_s(tcp, Case::RATE),
            ),
            "(>= 3)",
        );
        let link_mpps: Vec<f64> = self.link_pps.iter().map(|p| p / 1e6).collect();
        line(
            "64 B w64 message rate: xdp / raw link pps",
            ratios(&self.msgs_per_s(xdp, Case::RATE), &link_mpps),
            "(>= 0.5)",
        );
    }

    /// `mtu,round,path,bytes,window,mb_per_s,msgs_per_s,op` rows (`op` empty for the link).
    pub fn csv_rows(&self) -> String {
        let mut out = String::new();
        for (round, pps) in self.link_pps.iter().enumerate() {
            let bytes = udp_payload(self.mtu);
            let mbs = pps * bytes as f64 / 1e6;
            out.push_str(&format!(
                "{},{},raw link,{bytes},,{mbs:.2},{pps:.0},\n",
                self.mtu,
                round + 1
            ));
        }
        for ((provider, case), rounds) in &self.samples {
            for (round, s) in rounds.iter().enumerate() {
                if let Some(s) = s {
                    out.push_str(&format!(
                        "{},{},{provider},{},{},{:.2},{:.0},{}\n",
                        self.mtu,
                        round + 1,
                        case.bytes,
                        case.window,
                        s.mb_per_s,
                        s.msgs_per_s,
                        case.op.name()
                    ));
                }
            }
        }
        out
    }
}

/// The values that are numbers (failed runs are `NaN`).
pub fn finite(v: &[f64]) -> Vec<f64> {
    v.iter().copied().filter(|x| x.is_finite()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_rounds_leave_gaps_not_shifts() {
        let case = Case::RATE;
        let mut r = Results::new(1500, &["xdp".into(), "tcp".into()], &[case]);
        let s = |m| Sample {
            mb_per_s: m,
            msgs_per_s: m,
        };
        r.record("xdp", case, 1, s(1.0));
        r.record("xdp", case, 3, s(3.0));
        let v = r.mb_per_s("xdp", case);
        assert_eq!(v.len(), 3);
        assert!(v[1].is_nan());
        assert_eq!(finite(&v), vec![1.0, 3.0]);
        assert!(r.csv_rows().contains("1500,3,xdp,64,64,3.00,3,tagged\n"));
    }

    #[test]
    fn rma_rows_name_their_op() {
        let write = Case {
            op: Op::Write,
            ..Case::tagged(1 << 20, 16)
        };
        let mut r = Results::new(1500, &["xdp".into()], &[write]);
        let s = Sample {
            mb_per_s: 5.0,
            msgs_per_s: 5.0,
        };
        r.record("xdp", write, 1, s);
        assert!(
            r.csv_rows()
                .contains("1500,1,xdp,1048576,16,5.00,5,write\n")
        );
        assert_eq!(r.ops(), [Op::Write]);
        assert!(r.semantics().contains("fi_rma_bw -o write"));
    }

    #[test]
    fn payload_per_datagram_is_the_udp_payload_less_our_overhead() {
        let r = Results::new(1500, &[], &[]);
        assert_eq!(
            r.payload_per_datagram(),
            1472 - ofi_xdp_reliability::wire::DATA_OVERHEAD
        );
    }
}
