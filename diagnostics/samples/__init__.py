"""Samples: content-free skeletons of streams built from records, the cross-provider matrix, and frames rebuilt from shapes for replay."""
