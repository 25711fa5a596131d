//! The template's files: reading a folder (bounded, no symlinks, no hidden
//! folders such as `.terraform`), parsing each `.tf` file with `hcl-edit`
//! (which keeps byte spans), and turning a span into `line:column`.

use std::ops::Range;
use std::path::Path;

use hcl_edit::structure::Body;

use crate::error::LintError;

/// At most this many `.tf` files, this many bytes in all: a template is a few
/// files; anything far larger is refused rather than read.
pub const MAX_FILES: usize = 1_000;
pub const MAX_TOTAL_BYTES: u64 = 32 * 1024 * 1024;
/// Folders deeper than this are not read (modules nest a few levels).
const MAX_DEPTH: usize = 16;

/// One `.tf` file's text, named by its path relative to the template folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative path with `/` separators, e.g. `main.tf`, `modules/disk/main.tf`.
    pub path: String,
    pub text: String,
}

impl SourceFile {
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        SourceFile {
            path: path.into(),
            text: text.into(),
        }
    }

    /// The folder part of the path (`""` for the template's root).
    pub(crate) fn dir(&self) -> &str {
        self.path.rsplit_once('/').map_or("", |(dir, _)| dir)
    }
}

/// Reads every `.tf` file under `root`, in path order.
pub fn read_dir(root: &Path) -> Result<Vec<SourceFile>, LintError> {
    let metadata = std::fs::metadata(root).map_err(|source| LintError::Io {
        path: root.display().to_string(),
        source,
    })?;
    if !metadata.is_dir() {
        return Err(LintError::NotAFolder(root.display().to_string()));
    }
    let mut files = Vec::new();
    let mut total = 0u64;
    walk(root, "", 0, &mut files, &mut total)?;
    if files.is_empty() {
        return Err(LintError::NoFiles(root.display().to_string()));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn walk(
    dir: &Path,
    relative: &str,
    depth: usize,
    files: &mut Vec<SourceFile>,
    total: &mut u64,
) -> Result<(), LintError> {
    let io = |path: &Path, source| LintError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| io(dir, e))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // DirEntry::file_type does not follow links: a link is neither walked nor read.
        let kind = entry.file_type().map_err(|e| io(&path, e))?;
        let child = if relative.is_empty() {
            name.clone()
        } else {
            format!("{relative}/{name}")
        };
        if kind.is_dir() && depth < MAX_DEPTH {
            walk(&path, &child, depth + 1, files, total)?;
        } else if kind.is_file() && name.ends_with(".tf") {
            let size = entry.metadata().map_err(|e| io(&path, e))?.len();
            *total += size;
            if files.len() >= MAX_FILES || *total > MAX_TOTAL_BYTES {
                return Err(LintError::TooLarge {
                    files: MAX_FILES,
                    bytes: MAX_TOTAL_BYTES,
                });
            }
            let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
            let text = String::from_utf8(bytes).map_err(|_| LintError::NotUtf8(child.clone()))?;
            files.push(SourceFile::new(child, text));
        }
    }
    Ok(())
}

/// A parsed file with what turns its byte offsets into positions.
pub(crate) struct Parsed {
    pub path: String,
    pub dir: String,
    pub text: String,
    pub body: Body,
    line_starts: Vec<usize>,
}

impl Parsed {
    pub(crate) fn parse(file: &SourceFile) -> Result<Parsed, LintError> {
        let body = hcl_edit::parser::parse_body(&file.text).map_err(|error| {
            let location = error.location();
            LintError::Syntax {
                file: file.path.clone(),
                line: location.line(),
                column: location.column(),
                message: one_line(error.message()),
            }
        })?;
        let line_starts = std::iter::once(0)
            .chain(file.text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Ok(Parsed {
            path: file.path.clone(),
            dir: file.dir().to_string(),
            text: file.text.clone(),
            body,
            line_starts,
        })
    }

    /// One-based line and column (in characters) of a span's start; `1:1`
    /// when the parser gave no span.
    pub(crate) fn position(&self, span: Option<Range<usize>>) -> (u32, u32) {
        let Some(offset) = span.map(|s| s.start.min(self.text.len())) else {
            return (1, 1);
        };
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self
            .line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        let column = self
            .text
            .get(start..offset)
            .map_or(0, |prefix| prefix.chars().count());
        (clamp(line), clamp(column + 1))
    }
}

fn clamp(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The parser's message on one line, at most 200 characters.
fn one_line(message: &str) -> String {
    let joined = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = joined.chars().take(200).collect();
    if cut.is_empty() {
        cut = "invalid HCL".to_string();
    }
    cut
}
