//! Prices the policy's candidates for a few shapes many times: a profiling and latency probe.
//! `cargo run --release -p carver --example count_candidates [reps] [target]`
use carver::{MatmulTemplate, Target};
use carver_arch::HardwareDb;
fn main() {
    let reps: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let only: Option<Target> = std::env::args().nth(2).and_then(|a| a.parse().ok());
    let db = HardwareDb::embedded().unwrap();
    let arch = db.get("h100").unwrap();
    for t in Target::ALL
        .into_iter()
        .filter(|t| only.is_none_or(|o| o == *t))
    {
        let mut line = String::new();
        for (m, n, k) in [
            (1u64, 12288u64, 4096u64),
            (2048, 12288, 4096),
            (1537, 2049, 3001),
        ] {
            let tpl = MatmulTemplate::new(m, n, k).with_target(t);
            let Ok(p) = tpl.validate(arch) else { continue };
            let count = carver::policy::candidates(t.family(), &p, arch).len();
            let start = std::time::Instant::now();
            for _ in 0..reps {
                let _ = carver::recommend_hints(&tpl, arch, 8);
            }
            line += &format!(
                " {m}x{n}x{k}: {count} priced, {:?};",
                start.elapsed() / reps
            );
        }
        println!("{t}:{line}");
    }
}
