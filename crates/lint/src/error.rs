//! Why a folder could not be linted, in a module that names no sibling: the
//! reading of the files (`source.rs`), the persistent types given on the
//! command line (`persistent.rs`) and the walk's limits (the crate's root)
//! all end in a [`LintError`].

/// Why a folder could not be linted (each one line).
#[derive(Debug, thiserror::Error)]
pub enum LintError {
    #[error("{file}:{line}:{column}: syntax error: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a folder")]
    NotAFolder(String),
    #[error("{0} holds no .tf files")]
    NoFiles(String),
    #[error("{0} is not UTF-8 text")]
    NotUtf8(String),
    #[error("the template is too large to lint (at most {files} .tf files and {bytes} bytes)")]
    TooLarge { files: usize, bytes: u64 },
    #[error("references nest more than {0} deep (a local naming a local ...): the lint does not follow them")]
    TooDeep(usize),
    #[error("the template's module calls make more than {0} module instances: the lint does not read them all")]
    TooManyModules(usize),
    #[error("--persistent-type {spec:?}: {why}")]
    PersistentType { spec: String, why: String },
}
