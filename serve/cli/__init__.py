"""The ``steadyrank`` command line: the dispatcher (:mod:`.main`), one module per subcommand
(:mod:`.commands`), the options several share (:mod:`.options`) and the generated reference pages
(:mod:`.reference`).
"""
