//! Unpacking template archives safely.
//!
//! A template archive comes from a user and is unpacked on the server, so it
//! must not be able to write outside its directory or fill the disk. Rules:
//! relative paths without `..`; only files, directories and symbolic links; at
//! most [`MAX_ENTRIES`] entries and [`MAX_UNPACKED_BYTES`] bytes. Symbolic links
//! are created after every file and directory (so no file is ever written
//! through a link of the archive) and each must then resolve inside the root.

use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

/// Why an archive was not unpacked: the uploader's mistake, said in words
/// (never the archive's own bytes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidArchive(pub String);

pub const MAX_UNPACKED_BYTES: u64 = 64 * 1024 * 1024;
pub const MAX_ENTRIES: usize = 10_000;

fn invalid(message: impl Into<String>) -> InvalidArchive {
    InvalidArchive(message.into())
}

/// Unpacks a `.tar.gz` archive into `root` (an existing, empty directory).
pub fn unpack(archive: &[u8], root: &Path) -> Result<(), InvalidArchive> {
    // The tar stream itself is capped too, so a gzip bomb stops early.
    let stream_cap = MAX_UNPACKED_BYTES + (MAX_ENTRIES as u64 + 16) * 1024;
    let decoder = flate2::read::GzDecoder::new(archive).take(stream_cap);
    let mut tar = tar::Archive::new(decoder);
    // The tar crate's own errors quote the header bytes it could not read:
    // the uploader's bytes, not a message. Say what is wrong instead.
    let what = if archive.starts_with(&[0x1f, 0x8b]) {
        "the gzip stream does not hold a tar archive"
    } else {
        "not a gzip stream"
    };
    let not_tar = |_: std::io::Error| invalid(format!("not a tar.gz archive: {what}"));
    let entries = tar.entries().map_err(not_tar)?;
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut total: u64 = 0;
    let mut count = 0usize;
    let mut has_terraform = false;
    for entry in entries {
        let mut entry = entry.map_err(not_tar)?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XHeader | tar::EntryType::XGlobalHeader | tar::EntryType::GNULongName
        ) {
            continue;
        }
        count += 1;
        if count > MAX_ENTRIES {
            return Err(invalid(format!(
                "the archive has more than {MAX_ENTRIES} entries"
            )));
        }
        let raw_path = entry
            .path()
            .map_err(|error| invalid(format!("unreadable path in archive: {error}")))?
            .into_owned();
        let relative = safe_relative(&raw_path)?;
        if relative.as_os_str().is_empty() || abode_terraform::is_working_file(&relative) {
            continue;
        }
        let target = root.join(&relative);
        match kind {
            tar::EntryType::Directory => {
                fs::create_dir_all(&target).map_err(io_error(&relative))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                total = total.saturating_add(entry.size());
                if total > MAX_UNPACKED_BYTES {
                    return Err(invalid(format!(
                        "the archive unpacks to more than {} MiB",
                        MAX_UNPACKED_BYTES / 1024 / 1024
                    )));
                }
                if relative.extension().is_some_and(|ext| ext == "tf") {
                    has_terraform = true;
                }
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent).map_err(io_error(&relative))?;
                }
                let executable = entry.header().mode().map(|m| m & 0o111 != 0).unwrap_or(false);
                let mut file = fs::File::create(&target).map_err(io_error(&relative))?;
                let copied = io::copy(&mut (&mut entry).take(MAX_UNPACKED_BYTES), &mut file)
                    .map_err(io_error(&relative))?;
                if copied != entry.size() {
                    return Err(invalid(format!("{} is truncated", relative.display())));
                }
                set_mode(&target, if executable { 0o700 } else { 0o600 })
                    .map_err(io_error(&relative))?;
            }
            tar::EntryType::Symlink => {
                let link_target = entry
                    .link_name()
                    .map_err(|error| invalid(format!("unreadable link in archive: {error}")))?
                    .ok_or_else(|| invalid(format!("{} is a link without a target", relative.display())))?
                    .into_owned();
                abode_contract::text::check_name_text(
                    &format!("the link {}: target", relative.display()),
                    &link_target.to_string_lossy(),
                )
                .map_err(invalid)?;
                if link_target.is_absolute() {
                    return Err(invalid(format!(
                        "{} links to an absolute path, outside the template",
                        relative.display()
                    )));
                }
                if escapes(&relative, &link_target) {
                    return Err(invalid(format!(
                        "{} links outside the template",
                        relative.display()
                    )));
                }
                links.push((relative, link_target));
            }
            tar::EntryType::Link => {
                return Err(invalid(format!(
                    "{} is a hard link; template archives may hold only files, directories and symbolic links",
                    relative.display()
                )))
            }
            other => {
                return Err(invalid(format!(
                    "{} is a {:?} entry; template archives may hold only files, directories and symbolic links",
                    relative.display(),
                    other
                )))
            }
        }
    }
    create_links(root, &links)?;
    if !has_terraform {
        return Err(invalid("the archive holds no .tf file"));
    }
    Ok(())
}

/// A path from the archive, as a relative path with no `..` and no
/// control or bidirectional character (a file name is a name: it reaches
/// the lint's findings, plans and terminals); refused otherwise.
fn safe_relative(path: &Path) -> Result<PathBuf, InvalidArchive> {
    abode_contract::text::check_name_text("archive path", &path.to_string_lossy())
        .map_err(invalid)?;
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(invalid(format!(
                    "{} contains `..`: archive paths must stay inside the template",
                    path.display()
                )))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(invalid(format!(
                    "{} is an absolute path: archive paths must be relative",
                    path.display()
                )))
            }
        }
    }
    Ok(clean)
}

/// True when `target`, read from the link's own directory, climbs above the
/// root by its words alone (chains of links are checked after creation).
fn escapes(link: &Path, target: &Path) -> bool {
    let mut depth: i64 = link.components().count() as i64 - 1;
    for component in target.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return true,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

fn create_links(root: &Path, links: &[(PathBuf, PathBuf)]) -> Result<(), InvalidArchive> {
    let canonical_root = fs::canonicalize(root).map_err(io_error(root))?;
    for (relative, target) in links {
        let path = root.join(relative);
        if let Some(parent) = path.parent() {
            // A link made earlier may lead out of the root (links are only
            // checked once all exist): nothing is ever created through one.
            let existing = parent.ancestors().find(|ancestor| ancestor.exists());
            let inside = existing
                .and_then(|ancestor| fs::canonicalize(ancestor).ok())
                .is_some_and(|resolved| resolved.starts_with(&canonical_root));
            if !inside {
                return Err(invalid(format!(
                    "{} lies behind a link that leads outside the template",
                    relative.display()
                )));
            }
            fs::create_dir_all(parent).map_err(io_error(relative))?;
        }
        if fs::symlink_metadata(&path).is_ok() {
            return Err(invalid(format!(
                "{} appears twice in the archive",
                relative.display()
            )));
        }
        std::os::unix::fs::symlink(target, &path).map_err(io_error(relative))?;
    }
    for (relative, _) in links {
        let resolved = fs::canonicalize(root.join(relative)).map_err(|_| {
            invalid(format!(
                "{} is a link to nothing inside the template",
                relative.display()
            ))
        })?;
        if !resolved.starts_with(&canonical_root) {
            return Err(invalid(format!(
                "{} links outside the template",
                relative.display()
            )));
        }
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

fn io_error(relative: &Path) -> impl Fn(io::Error) -> InvalidArchive + '_ {
    move |error| {
        // Conflicting entries (a file where a directory is needed) land here.
        invalid(format!("cannot unpack {}: {error}", relative.display()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    enum Entry {
        File(&'static str, &'static [u8]),
        Link(&'static str, &'static str),
        HardLink(&'static str, &'static str),
        Fifo(&'static str),
        /// A header that claims `size` bytes (the data is never read).
        Huge(&'static str, u64),
    }

    fn archive(entries: &[Entry]) -> Vec<u8> {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        for entry in entries {
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o644);
            match entry {
                Entry::File(path, data) => {
                    header.set_size(data.len() as u64);
                    builder.append_data(&mut header, path, *data).unwrap();
                }
                Entry::Link(path, target) | Entry::HardLink(path, target) => {
                    header.set_entry_type(if matches!(entry, Entry::Link(..)) {
                        tar::EntryType::Symlink
                    } else {
                        tar::EntryType::Link
                    });
                    header.set_size(0);
                    builder.append_link(&mut header, path, target).unwrap();
                }
                Entry::Fifo(path) => {
                    header.set_entry_type(tar::EntryType::Fifo);
                    header.set_size(0);
                    builder.append_data(&mut header, path, &[][..]).unwrap();
                }
                Entry::Huge(path, size) => {
                    header.set_size(*size);
                    header.set_path(path).unwrap();
                    header.set_cksum();
                    builder.append(&header, &[0u8; 512][..]).unwrap();
                }
            }
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    const MAIN: Entry = Entry::File("main.tf", b"resource \"terraform_data\" \"x\" {}\n");

    /// Each case: the archive, and `None` if it unpacks or the start of the
    /// refusal.
    #[test]
    fn archives_unpack_only_inside_their_root() {
        let cases: Vec<(&str, Vec<Entry>, Option<&str>)> = vec![
            (
                "plain",
                vec![MAIN, Entry::File("modules/a/x.tf", b"")],
                None,
            ),
            (
                "link inside",
                vec![MAIN, Entry::File("d/f", b"x"), Entry::Link("l", "d/f")],
                None,
            ),
            (
                "link to a sibling dir",
                vec![MAIN, Entry::File("d/f", b"x"), Entry::Link("e/l", "../d")],
                None,
            ),
            (
                "link above the root",
                vec![MAIN, Entry::Link("l", "../x")],
                Some("l links outside the template"),
            ),
            (
                "absolute link",
                vec![MAIN, Entry::Link("l", "/etc")],
                Some("l links to an absolute path"),
            ),
            (
                "escape through a chain of links",
                vec![MAIN, Entry::Link("r", "."), Entry::Link("s", "r/..")],
                Some("s links outside the template"),
            ),
            (
                "dangling link",
                vec![MAIN, Entry::Link("l", "nothing")],
                Some("l is a link to nothing"),
            ),
            (
                "hard link",
                vec![MAIN, Entry::HardLink("h", "main.tf")],
                Some("h is a hard link"),
            ),
            (
                "fifo",
                vec![MAIN, Entry::Fifo("p")],
                Some("p is a Fifo entry"),
            ),
            (
                "over the size limit",
                vec![MAIN, Entry::Huge("big", MAX_UNPACKED_BYTES + 1)],
                Some("the archive unpacks to more than 64 MiB"),
            ),
            (
                "no terraform",
                vec![Entry::File("README", b"hi")],
                Some("the archive holds no .tf file"),
            ),
            (
                "a right-to-left override in a file name",
                vec![MAIN, Entry::File("notes\u{202e}ft.txt", b"x")],
                Some("archive path `notes\\u{202e}ft.txt` holds \\u{202e}"),
            ),
            (
                "an isolate in a directory name",
                vec![MAIN, Entry::File("mod\u{2066}/x.tf", b"")],
                Some("archive path `mod\\u{2066}/x.tf` holds"),
            ),
            (
                "an escape in a file name",
                vec![MAIN, Entry::File("a\x1b[2J.tf", b"")],
                Some("archive path `a\\u{1b}[2J.tf` holds"),
            ),
            (
                "a control character in a link's target",
                vec![MAIN, Entry::Link("l", "main\u{202e}.tf")],
                Some("the link l: target `main\\u{202e}.tf` holds"),
            ),
        ];
        for (name, entries, refusal) in cases {
            let root = tempfile::tempdir().unwrap();
            let result = unpack(&archive(&entries), root.path());
            match (refusal, result) {
                (None, Ok(())) => {}
                (Some(expected), Err(InvalidArchive(message))) => {
                    assert!(message.starts_with(expected), "{name}: {message}")
                }
                (expected, got) => panic!("{name}: expected {expected:?}, got {got:?}"),
            }
        }
    }

    /// A refused archive leaves nothing outside its root: a link that escapes
    /// only once the links before it exist must not serve as the way to a
    /// directory created for a later link.
    #[test]
    fn links_never_create_anything_outside_the_root() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("template");
        fs::create_dir(&root).unwrap();
        let entries = [
            MAIN,
            Entry::Link("r", "."),
            Entry::Link("s", "r/.."),
            Entry::Link("s/outside/l", "."),
        ];
        let result = unpack(&archive(&entries), &root);
        assert!(matches!(result, Err(InvalidArchive(_))), "{result:?}");
        let names: Vec<String> = fs::read_dir(base.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["template"]);
    }

    #[test]
    fn terraform_working_files_are_left_out() {
        let root = tempfile::tempdir().unwrap();
        let entries = [
            MAIN,
            Entry::File(".terraform.lock.hcl", b"lock"),
            Entry::File(".terraform/providers/x", b"binary"),
            Entry::File("terraform.tfstate", b"{}"),
            Entry::File("terraform.tfstate.1795979172.backup", b"{}"),
        ];
        unpack(&archive(&entries), root.path()).unwrap();
        let mut names: Vec<String> = fs::read_dir(root.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["main.tf"]);
    }
}
