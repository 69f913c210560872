"""Topologies and experiments nobody here wrote: random valid ones (``generate``), imported
Internet-Topology-Zoo graphs (``zoo_import``), the loss models that fit a measured trace
(``trace_fit``), and writing them as YAML a user can read (``yaml_files``)."""
