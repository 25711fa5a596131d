//! Packs a template folder into the `.tar.gz` that `abode templates push` uploads.
//!
//! Only what describes the template travels: Terraform's working files
//! (`.terraform/`, the dependency lock file), any state file and saved plan stay behind,
//! because the server initialises templates against its own provider mirror and
//! keeps workspace state itself; a state file could also carry secrets.
//! Entries are sorted and timestamps zeroed so the same folder always packs to
//! the same bytes. Symbolic links are kept as links (never followed), so the
//! server, not the client, decides whether they stay inside the template.

use std::fs;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::error::ArchiveError;

/// True for paths (relative to the template root) that are never uploaded.
pub fn is_excluded(relative: &Path) -> bool {
    abode_terraform::is_working_file(relative)
        || relative
            .file_name()
            .is_some_and(|name| name.to_string_lossy().ends_with(".tfplan"))
}

/// True for a Terraform saved plan whatever its name (`-out=tfplan` is common):
/// a zip archive whose first entry is `tfplan`. It carries the state it was
/// made from, so it never travels.
fn is_saved_plan(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 36];
    let read = fs::File::open(path).and_then(|mut file| file.read_exact(&mut head));
    read.is_ok() && head.starts_with(b"PK\x03\x04") && &head[30..36] == b"tfplan"
}

/// The files and folders that would be uploaded, relative to `root`, in archive order.
pub fn template_entries(root: &Path) -> Result<Vec<PathBuf>, ArchiveError> {
    if !root.is_dir() {
        return Err(ArchiveError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    let mut entries = Vec::new();
    collect(root, Path::new(""), &mut entries)?;
    let has_tf = entries.iter().any(|path| {
        path.extension().is_some_and(|ext| ext == "tf")
            && fs::symlink_metadata(root.join(path)).is_ok_and(|meta| meta.is_file())
    });
    if !has_tf {
        return Err(ArchiveError::NoTerraformFiles {
            path: root.to_path_buf(),
        });
    }
    Ok(entries)
}

fn collect(root: &Path, relative: &Path, out: &mut Vec<PathBuf>) -> Result<(), ArchiveError> {
    let dir = root.join(relative);
    let read_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ArchiveError::Read { path, source }
    };
    let mut names = Vec::new();
    for entry in fs::read_dir(&dir).map_err(read_err(&dir))? {
        names.push(entry.map_err(read_err(&dir))?.file_name());
    }
    names.sort();
    for name in names {
        let child = relative.join(&name);
        if is_excluded(&child) {
            continue;
        }
        let meta = fs::symlink_metadata(root.join(&child)).map_err(read_err(&root.join(&child)))?;
        if meta.is_file() && is_saved_plan(&root.join(&child)) {
            continue;
        }
        out.push(child.clone());
        if meta.is_dir() {
            collect(root, &child, out)?;
        }
    }
    Ok(())
}

/// Packs `root` as a gzip-compressed tar archive.
pub fn pack_template(root: &Path) -> Result<Vec<u8>, ArchiveError> {
    let entries = template_entries(root)?;
    let encoder = GzEncoder::new(Vec::new(), Compression::default());
    let mut builder = tar::Builder::new(encoder);
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Deterministic);
    for relative in &entries {
        let full = root.join(relative);
        builder
            .append_path_with_name(&full, relative)
            .map_err(|source| ArchiveError::Read { path: full, source })?;
    }
    let finish_err = |source| ArchiveError::Read {
        path: root.to_path_buf(),
        source,
    };
    let encoder = builder.into_inner().map_err(finish_err)?;
    encoder.finish().map_err(finish_err)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Read;

    fn unpack_names(bytes: &[u8]) -> Vec<(String, tar::EntryType)> {
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
        archive
            .entries()
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                (
                    entry.path().unwrap().to_string_lossy().into_owned(),
                    entry.header().entry_type(),
                )
            })
            .collect()
    }

    #[test]
    fn exclusions() {
        let cases = [
            ("main.tf", false),
            ("modules/home/main.tf", false),
            (".terraform", true),
            (".terraform/providers/x", true),
            ("modules/a/.terraform/x", true),
            (".terraform.lock.hcl", true),
            ("terraform.tfstate", true),
            ("terraform.tfstate.backup", true),
            // `terraform state mv/rm` leaves timestamped backups of the state.
            ("terraform.tfstate.1795979172.backup", true),
            ("notes.backup", false),
            ("sub/x.tfstate", true),
            ("plan.tfplan", true),
            ("README.md", false),
            ("terraform.tfvars", false),
        ];
        for (path, excluded) in cases {
            assert_eq!(is_excluded(Path::new(path)), excluded, "{path}");
        }
    }

    #[test]
    fn packs_template_files_only_and_deterministically() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("main.tf"), "# main\n").unwrap();
        fs::create_dir_all(root.join("modules/home")).unwrap();
        fs::write(root.join("modules/home/main.tf"), "# home\n").unwrap();
        fs::create_dir_all(root.join(".terraform/providers")).unwrap();
        fs::write(root.join(".terraform/providers/p"), "bin").unwrap();
        fs::write(root.join("terraform.tfstate"), "{\"secret\":1}").unwrap();
        // `terraform plan -out=tfplan`: a saved plan under any name (a zip
        // whose first entry is `tfplan`, beside the state it was made from).
        let mut saved_plan = b"PK\x03\x04".to_vec();
        saved_plan.extend_from_slice(&[0; 22]);
        saved_plan.extend_from_slice(&[6, 0, 0, 0]);
        saved_plan.extend_from_slice(b"tfplan{\"secret\":1}");
        fs::write(root.join("tfplan"), saved_plan).unwrap();
        std::os::unix::fs::symlink("main.tf", root.join("link.tf")).unwrap();

        let first = pack_template(root).unwrap();
        let second = pack_template(root).unwrap();
        assert_eq!(first, second, "packing must be deterministic");

        let names = unpack_names(&first);
        let expected = vec![
            ("link.tf".to_string(), tar::EntryType::Symlink),
            ("main.tf".to_string(), tar::EntryType::Regular),
            ("modules".to_string(), tar::EntryType::Directory),
            ("modules/home".to_string(), tar::EntryType::Directory),
            ("modules/home/main.tf".to_string(), tar::EntryType::Regular),
        ];
        assert_eq!(names, expected);

        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(first.as_slice()));
        let mut main = String::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            if entry.path().unwrap() == Path::new("main.tf") {
                entry.read_to_string(&mut main).unwrap();
            }
        }
        assert_eq!(main, "# main\n");
    }

    #[test]
    fn refuses_missing_or_empty_folders() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        assert!(matches!(
            pack_template(&missing),
            Err(ArchiveError::NotADirectory { .. })
        ));
        fs::write(dir.path().join("README.md"), "no template here").unwrap();
        assert!(matches!(
            pack_template(dir.path()),
            Err(ArchiveError::NoTerraformFiles { .. })
        ));
    }
}
