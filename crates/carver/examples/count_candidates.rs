//! Prices the policy's candidates for a few shapes many times: a profiling and latency probe.
//! `cargo run --release -p carver --example count_candidates [reps] [target] [MxNxK ...]`
use carver::{Family, MatmulTemplate, TopK};
use carver_arch::HardwareDb;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let only: Option<Family> = args.get(2).and_then(|a| a.parse().ok());
    let mut shapes: Vec<(u64, u64, u64)> = args
        .iter()
        .skip(3)
        .filter_map(|s| {
            let v: Vec<u64> = s.split('x').filter_map(|x| x.parse().ok()).collect();
            (v.len() == 3).then(|| (v[0], v[1], v[2]))
        })
        .collect();
    if shapes.is_empty() {
        shapes = vec![(1, 12288, 4096), (2048, 12288, 4096), (1537, 2049, 3001)];
    }
    let db = HardwareDb::embedded().unwrap();
    let arch = db.get("h100").unwrap();
    for t in Family::ALL
        .into_iter()
        .filter(|t| only.is_none_or(|o| o == *t))
    {
        let mut line = String::new();
        for &(m, n, k) in &shapes {
            let tpl = MatmulTemplate::new(m, n, k).with_family(t);
            let Ok(p) = tpl.validate(arch) else { continue };
            let count = carver::policy::candidates(t.rules(), &p, arch).len();
            let kept = carver::policy::candidates_for_topk(t.rules(), &p, arch, Some(8)).len();
            let start = std::time::Instant::now();
            for _ in 0..reps {
                let _ = carver::recommend_hints(&tpl, arch, TopK::DEFAULT);
            }
            line += &format!(
                " {m}x{n}x{k}: {kept} of {count} priced, {:?};",
                start.elapsed() / reps
            );
        }
        println!("{t}:{line}");
    }
}
