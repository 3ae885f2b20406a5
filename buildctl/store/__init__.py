"""What a build leaves: the artifact store and its manifest, pre-staged downloads, what wheels say
about themselves and how two compare, publishing to an index."""
