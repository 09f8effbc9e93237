from jedictl.cli import main

main()
