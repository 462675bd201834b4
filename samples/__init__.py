"""The starter corpus: content-free samples for every dialect and ending, shipped as package data
(`streamtap.corpus`). See README.md in this folder for how they are made."""
