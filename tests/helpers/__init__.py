"""Test-only simulations that nothing shipped uses: the scripted agent CLIs' model side
(:mod:`helpers.agents`), the text adventure world (:mod:`helpers.textworld`) and the noisy world
that training quality is measured on (:mod:`helpers.noisy_world`, also read by
``bench/bench_train_quality.py``). The scripted model server and the simulated models the demo
runs on ship in :mod:`skillopt_ci.sim`."""
