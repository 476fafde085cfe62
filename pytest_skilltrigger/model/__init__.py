"""The ground floor: the value types every layer reads, importing nothing above support.

The trigger context and the listing rules (:mod:`.context`), what runs and queries produced
(:mod:`.outcome`), the settings (:mod:`.settings`), the verdict rule (:mod:`.verdict`) and
sampling plan (:mod:`.plan`), prices and spending (:mod:`.prices`), and how values are written
for people (:mod:`.formatting`). Nothing here does I/O beyond reading a price file, runs a
call, or knows pytest.
"""
