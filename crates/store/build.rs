//! Embeds the schema's migrations, as sqlx's `migrate!` would without
//! compiling sqlx's proc macros into every build: `$OUT_DIR/migrations.rs`
//! lists each backend's files in order, with their text
//! (`src/migrations.rs` hands them to sqlx).

use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR")?;
    let mut out = String::new();
    for (name, dir) in [
        ("SQLITE", "migrations/sqlite"),
        ("POSTGRES", "migrations/postgres"),
    ] {
        println!("cargo:rerun-if-changed={dir}");
        let root = Path::new(&manifest).join(dir);
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&root)? {
            let file = entry?
                .file_name()
                .into_string()
                .map_err(|name| format!("{name:?} is not UTF-8"))?;
            let Some(stem) = file.strip_suffix(".sql") else {
                continue;
            };
            // What sqlx reads as a version and a description, and nothing
            // it would read otherwise (reversible migrations).
            let well_named = stem
                .split_once('_')
                .is_some_and(|(version, _)| version.parse::<i64>().is_ok())
                && !stem.ends_with(".up")
                && !stem.ends_with(".down");
            if !well_named {
                return Err(
                    format!("{dir}/{file}: a migration is named VERSION_DESCRIPTION.sql").into(),
                );
            }
            files.push(file);
        }
        files.sort();
        writeln!(out, "pub(crate) const {name}: &[(&str, &str)] = &[")?;
        for file in files {
            let path = root.join(&file);
            writeln!(
                out,
                "    ({file:?}, include_str!({:?})),",
                path.display().to_string()
            )?;
        }
        writeln!(out, "];")?;
    }
    std::fs::write(
        Path::new(&std::env::var("OUT_DIR")?).join("migrations.rs"),
        out,
    )?;
    Ok(())
}
