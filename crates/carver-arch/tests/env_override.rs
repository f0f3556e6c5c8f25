//! `CARVER_HARDWARE_DB` through `HardwareDb::load(None)`. Environment variables are process-wide,
//! so this lives in its own test binary with a single test that sets and clears the variable.

use std::fs;
use std::path::Path;

use carver_arch::{HARDWARE_DB_ENV, HardwareDb};

/// Writes a copy of the shipped H100 SXM description under a new key into `dir`.
fn write_lab_gpu(dir: &Path, key: &str) {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hardware-db/h100-sxm.toml");
    let text = fs::read_to_string(shipped)
        .unwrap()
        .replacen(r#"key = "h100-sxm""#, &format!(r#"key = "{key}""#), 1)
        .replacen(
            r#"name = "NVIDIA H100 80GB HBM3""#,
            &format!(r#"name = "{key}""#),
            1,
        )
        .replacen(
            r#"aliases = ["h100", "h100-sxm5", "h100-sxm5-80gb"]"#,
            "aliases = []",
            1,
        );
    assert!(text.contains(&format!(r#"key = "{key}""#)) && text.contains("aliases = []"));
    fs::write(dir.join(format!("{key}.toml")), text).unwrap();
}

#[test]
fn hardware_db_env_var_adds_entries_and_an_explicit_dir_wins() {
    let from_env = tempfile::tempdir().unwrap();
    write_lab_gpu(from_env.path(), "env-gpu");
    let explicit = tempfile::tempdir().unwrap();
    write_lab_gpu(explicit.path(), "flag-gpu");
    let shipped = HardwareDb::embedded().unwrap().len();

    // SAFETY: this test binary runs this one test only, so no other thread reads the environment.
    unsafe { std::env::set_var(HARDWARE_DB_ENV, from_env.path()) };
    let db = HardwareDb::load(None).unwrap();
    assert_eq!(db.len(), shipped + 1);
    assert!(db.get("env-gpu").is_ok());

    // `--hardware-db DIR` takes the place of the variable rather than adding to it.
    let db = HardwareDb::load(Some(explicit.path())).unwrap();
    assert!(db.get("flag-gpu").is_ok());
    assert!(db.get("env-gpu").is_err());

    // A variable naming a missing directory is an error, not a silent fallback.
    let missing = from_env.path().join("missing");
    unsafe { std::env::set_var(HARDWARE_DB_ENV, &missing) };
    let err = HardwareDb::load(None).unwrap_err();
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );

    // An empty variable means "not set".
    unsafe { std::env::set_var(HARDWARE_DB_ENV, "") };
    assert_eq!(HardwareDb::load(None).unwrap().len(), shipped);

    unsafe { std::env::remove_var(HARDWARE_DB_ENV) };
    assert_eq!(HardwareDb::load(None).unwrap().len(), shipped);
}
