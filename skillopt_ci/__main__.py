from skillopt_ci.cli import main

main()
