//! The binary's error: the library's [`talker::Error`] joined with the queue's own errors, and
//! the exit code each maps to (the README's table). The library keeps them apart because the
//! queue stands on the renderer: a render's error never needs to know about job specs.

#[cfg(feature = "render")]
use talker::queue::{QueueError, SpecError};

pub type Result<T, E = CliError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Talker(#[from] talker::Error),
    #[cfg(feature = "render")]
    #[error(transparent)]
    JobSpec(#[from] SpecError),
    #[cfg(feature = "render")]
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[cfg(feature = "render")]
    #[error("{failed} of {total} jobs failed; talker status shows their errors")]
    JobsFailed { failed: usize, total: usize },
}

impl CliError {
    /// 2 for anything the user can fix in what they passed in, 1 otherwise, 130 when cancelled.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Talker(e) => e.exit_code(),
            #[cfg(feature = "render")]
            CliError::JobSpec(_) => 2,
            #[cfg(feature = "render")]
            CliError::Queue(e) if e.is_bad_input() => 2,
            #[cfg(feature = "render")]
            CliError::Queue(_) | CliError::JobsFailed { .. } => 1,
        }
    }

    /// The message, then each cause that says something new.
    pub fn chain(&self) -> Vec<String> {
        match self {
            CliError::Talker(e) => e.chain(),
            #[cfg(feature = "render")]
            e => talker::error::chain(e),
        }
    }
}

#[cfg(feature = "render")]
impl CliError {
    /// A usage error (exit 2) with this message.
    pub fn usage(message: String) -> CliError {
        CliError::Talker(talker::Error::Usage(message))
    }
}

#[cfg(feature = "render")]
impl From<talker::face::FaceError> for CliError {
    fn from(e: talker::face::FaceError) -> CliError {
        CliError::Talker(e.into())
    }
}

#[cfg(all(test, feature = "render"))]
mod tests {
    use super::*;

    #[test]
    fn queue_errors_split_into_bad_input_and_the_rest() {
        assert_eq!(CliError::from(QueueError::NoSuchJob(3)).exit_code(), 2);
        let open = QueueError::Open {
            location: "q".into(),
            message: "m".into(),
        };
        assert_eq!(CliError::from(open).exit_code(), 1);
        let spec = SpecError {
            file: "s.json".into(),
            at: "output".into(),
            message: "m".into(),
        };
        assert_eq!(CliError::from(spec).exit_code(), 2);
        assert_eq!(
            CliError::JobsFailed {
                failed: 1,
                total: 2
            }
            .exit_code(),
            1
        );
        assert_eq!(CliError::from(talker::Error::Cancelled).exit_code(), 130);
    }
}
