//! Embeds every `hardware-db/*.toml` file so the binary works with no files around it.
use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let db_dir = manifest.join("../../hardware-db");
    println!("cargo:rerun-if-changed={}", db_dir.display());
    let mut entries: Vec<PathBuf> = fs::read_dir(&db_dir)
        .expect("hardware-db/ directory next to the workspace root")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    entries.sort();
    let mut out = String::from(
        "/// (file name, contents) of every shipped hardware description.\npub static EMBEDDED: &[(&str, &str)] = &[\n",
    );
    for path in &entries {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path.file_name().unwrap().to_string_lossy();
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.canonicalize().unwrap().display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(env::var("OUT_DIR").unwrap()).join("embedded_db.rs");
    fs::write(dest, out).unwrap();
}
