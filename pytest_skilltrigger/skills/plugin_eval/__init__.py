"""The official runner's cases (``claude plugin eval``): read as trigger items, written back.

Teams that already keep ``claude plugin eval`` cases should not have to rewrite them as eval
sets, and teams with eval sets should be able to hand them to the official runner. The
package is split by job: :mod:`.schema` is what the pinned runner accepts, :mod:`.read`
walks the case folders and reads them into eval sets, :mod:`.classify` decides which cases
are trigger checks (and which skill an ``input_match`` names), :mod:`.write` exports an eval
set as cases. The skill catalog imports only the reader, the session's end only the writer.
"""
