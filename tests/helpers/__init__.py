"""Code the tests share, imported as ``helpers.<module>`` (``tests/`` is on the path through
``tests/conftest.py``); no test module imports another. The CLI runner (:mod:`helpers.cli`), the
checkout's and the tests' folders (:mod:`helpers.paths`), the example project and its git
repository (:mod:`helpers.project`, :mod:`helpers.repo`), pull requests on the fake GitHub
(:mod:`helpers.action`), training runs (:mod:`helpers.training`), and test-only simulations that
nothing shipped uses: the scripted agent CLIs' model side (:mod:`helpers.agents`), the text
adventure world (:mod:`helpers.textworld`), the noisy world that training quality is measured on
(:mod:`helpers.noisy_world`) and the worlds whose properties vary around it
(:mod:`helpers.worlds`), both also read by ``bench/bench_train_quality.py``. The scripted model
server and the simulated models the demo runs on ship in :mod:`skillopt_ci.sim`."""
