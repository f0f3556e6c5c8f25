//! carver-tunedb (placeholder while the workspace is set up)
