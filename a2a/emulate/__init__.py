"""The emulated cluster: network namespaces wired as a switch, ring, torus or fat tree. Imports: the ground."""
