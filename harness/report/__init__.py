"""Reports people read: run tables with statistics (:mod:`.tables`, :mod:`.stats`), static
evaluation of predicted actions (:mod:`.static_eval`), and the HTML trajectory viewer
(:mod:`.viewer`, served by :mod:`.serve`). Everything here reads records and files only; nothing
touches a device or a model."""
