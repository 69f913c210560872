"""The emulated network: Mininet + Open vSwitch + the os-ken multicast-tree controller,
link impairment (netem or a user-space relay) and Docker or namespace hosts."""
