"""The file formats: the job document, surgical YAML and JSON edits, the view, exactness."""
